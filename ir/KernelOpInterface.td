//===- KernelOpInterface.td - an op that becomes a kernel --*- tablegen -*-===//
//
// Every question the compiler asks of an op that becomes one kernel launch,
// answered by the op: which CUDA template runs it in each phase, its name,
// and the bytes and FLOPs the cost model counts. Adding a kernel op means
// implementing this interface (Kiln_KernelOp in KilnOps.td does most of it).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KERNEL_OP_INTERFACE_TD
#define KILN_KERNEL_OP_INTERFACE_TD

include "mlir/IR/OpBase.td"

def Kiln_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    An op that one kernel launch computes: every kiln op but the weight
    references (`kiln.weight`, `kiln.packed_weight`) and `kiln.kv_read` (a
    view of the cache that the consuming kernel reads itself). The
    tensor-level ops are kernels too (the unfused pipeline and the cost
    model count them) but have no CUDA template: only the ref device runs
    them, and the fusion pipeline leaves none of them.
  }];
  let methods = [
    InterfaceMethod<[{
        The CUDA template (codegen/) that runs the op in `phase`: none when
        only the ref device runs it. Declared by each op in ODS
        (Kiln_KernelOp's template arguments); a fused_qkv into a
        quantized cache decodes as it prefills (its GEMM, then its
        epilogue: qkv_gemv writes an f16 cache a column at a time, where a
        quantized head needs all its columns at once), and so does one of
        a quantized weight whose head dim is not a multiple of 32
        (decodesAsPrefill).
      }],
      "::kiln::KernelTemplate", "getKernelTemplate",
      (ins "::kiln::Phase":$phase), [{}], [{
        if (phase == ::kiln::Phase::decode &&
            ConcreteOp::kTemplates[static_cast<int>(phase)] ==
                ::kiln::KernelTemplate::qkv_gemv &&
            ::kiln::decodesAsPrefill($_op.getOperation()))
          phase = ::kiln::Phase::prefill;
        return ConcreteOp::kTemplates[static_cast<int>(phase)];
      }]>,
    InterfaceMethod<[{
        The kernel's provenance name, from the Hugging Face module names in
        its location ("layers.3.attn.norm_qkv_rope"): kiln-name-kernels
        stores it as `kiln.name`. By default the innermost module of the
        location, with the op's mnemonic after it for ops whose module does
        not say what they do, and "_rope" for ops that rotate.
      }],
      "std::string", "getKernelName", (ins), [{}], [{
        return ::kiln::moduleKernelName($_op.getOperation(),
                                        ConcreteOp::kNamedByMnemonic);
      }]>,
    InterfaceMethod<[{
        The layer of the KV cache the op's kernel reads or writes (its
        KCache and VCache parameters are bound to that layer's keys and
        values in the pool); none by default.
      }],
      "std::optional<int64_t>", "getCacheLayer", (ins), [{}], [{
        return std::nullopt;
      }]>,
    InterfaceMethod<[{
        The HBM traffic and arithmetic of the op's kernel, from its types,
        dynamic dimensions counting as `shape`'s tokens and keys. By default
        every operand read once (weights, cached keys and values and
        activations apart) and every result written once, one FLOP per
        result element.
      }],
      "::kiln::KernelCost", "getKernelCost", (ins "::kiln::CostShape":$shape),
      [{}], [{
        return ::kiln::operandsAndResultsCost($_op.getOperation(), shape);
      }]>,
  ];
}

#endif // KILN_KERNEL_OP_INTERFACE_TD
