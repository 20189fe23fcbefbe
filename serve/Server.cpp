//===- Server.cpp ---------------------------------------------------------===//
#include "serve/Server.h"

#include "runtime/TextStream.h"
#include "serve/OpenAiResponse.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <deque>
#include <random>

namespace kiln::serve {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

int64_t unixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// "cmpl-" and 24 random hex digits, as OpenAI's ids look.
std::string responseId(bool chat) {
  static thread_local std::mt19937_64 random(std::random_device{}());
  return absl::StrFormat("%s-%012x%012x", chat ? "chatcmpl" : "cmpl",
                         random() & 0xffffffffffff, random() & 0xffffffffffff);
}

/// One HTTP/1.1 chunk of a chunked body.
std::string chunk(const std::string &data) {
  return absl::StrFormat("%x\r\n%s\r\n", data.size(), data);
}

/// A failed or cancelled request as OpenAI's error.
ApiError errorOf(const absl::Status &s) {
  std::string message(s.message());
  if (absl::IsCancelled(s))
    return {503, "server_shutting_down", "", message};
  if (absl::IsResourceExhausted(s))
    return {503, "kv_pool_exhausted", "", message};
  if (absl::IsInvalidArgument(s))
    return {400, "invalid_value", "", message};
  return {500, "device_error", "", message};
}

} // namespace

/// One connection: reads requests one after another (keep-alive), answers
/// each, and while a generation runs watches the socket, so that a client
/// that leaves has its request cancelled at once.
class Session : public std::enable_shared_from_this<Session> {
public:
  Session(tcp::socket socket, Server &server)
      : stream_(std::move(socket)), server_(server) {}
  void start() { read(); }

private:
  /// The generation this connection waits for.
  struct Job {
    uint64_t serial = 0;
    Engine *engine = nullptr;
    int64_t ticket = -1;
    ResponseHead head;
    bool stream = false, includeUsage = false, first = true;
    bool finished = false;
    int64_t promptTokens = 0;
    std::unique_ptr<TextStream> text; // null without a tokenizer
    std::string pendingText, wholeText;
    std::vector<int32_t> pendingIds, tokens;
    Clock::time_point started;
  };

  void read() {
    if (closed_)
      return;
    if (server_.state_ == Server::State::Draining && requests_ > 0)
      return close();
    parser_.emplace();
    parser_->body_limit(server_.options_.maxBodyBytes);
    parser_->header_limit(16 << 10);
    // An idle connection (or a slow sender) is closed after a while.
    stream_.expires_after(std::chrono::seconds(120));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->onRead(ec);
                     });
  }

  void onRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keepAlive_ = false;
      return refuse({413, "request_too_large", "",
                     absl::StrCat("the request body exceeds ",
                                  server_.options_.maxBodyBytes, " bytes")});
    }
    if (ec == http::error::header_limit) {
      keepAlive_ = false;
      return refuse(
          {431, "headers_too_large", "", "the headers are too large"});
    }
    if (ec &&
        ec.category() ==
            http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && buffer_.size() > 0) {
      keepAlive_ = false; // where the next request starts is unknown
      what_ = "(malformed)";
      return refuse({400, "bad_request", "",
                     absl::StrCat("not an HTTP/1.1 request: ", ec.message())});
    }
    if (ec) // the client's end, a timeout
      return close();
    ++requests_;
    stream_.expires_never();
    handle(parser_->release());
  }

  void handle(http::request<http::string_body> req) {
    keepAlive_ = req.keep_alive();
    std::string target(req.target());
    target = target.substr(0, target.find('?'));
    what_ = absl::StrCat(std::string(req.method_string()), " ", target);
    bool get = req.method() == http::verb::get;
    bool post = req.method() == http::verb::post;
    if (target == "/health" && get) {
      auto [status, body] = server_.health();
      return respond(status, body, "application/json");
    }
    if (target == "/metrics" && get)
      return respond(200, server_.metrics_.text(),
                     "text/plain; version=0.0.4; charset=utf-8");
    bool completions = target == "/v1/completions";
    bool chat = target == "/v1/chat/completions";
    bool models = target == "/v1/models";
    if (!completions && !chat && !models)
      return refuse({404, "not_found", "", absl::StrCat("no route ", target)});
    if ((models && !get) || (!models && !post))
      return refuse({405, "method_not_allowed", "",
                     absl::StrCat(what_, " is not allowed")});
    double retryAfter = 0;
    if (auto e = server_.admit(std::string(req[http::field::authorization]),
                               retryAfter))
      return refuse(*e, retryAfter);
    if (models)
      return respond(200, server_.modelsList(), "application/json");
    ApiRequest api;
    if (auto e = parseApiRequest(
            req.body(),
            chat ? Endpoint::ChatCompletions : Endpoint::Completions, api))
      return refuse(*e);
    ServedModel *model = nullptr;
    bool fallback = false;
    if (auto e = server_.pick(api.model, model, fallback))
      return refuse(*e);
    PreparedRequest prepared;
    if (auto e = prepareRequest(api, model->info, server_.options_.maxTokensCap,
                                prepared))
      return refuse(*e);
    start(*model, std::move(prepared), api, fallback);
  }

  void start(ServedModel &model, PreparedRequest prepared,
             const ApiRequest &api, bool fallback) {
    auto job = std::make_unique<Job>();
    job->serial = ++serials_;
    job->engine = model.engine.get();
    job->head = {
        responseId(api.endpoint == Endpoint::ChatCompletions), unixSeconds(),
        model.info.name, api.endpoint == Endpoint::ChatCompletions,
        api.returnTokenIds ? prepared.request.prompt : std::vector<int32_t>()};
    job->stream = api.stream;
    job->includeUsage = api.includeUsage;
    job->promptTokens = prepared.promptTokens;
    job->started = Clock::now();
    if (const TextTokenizer *tok = model.info.tokenizer) {
      Job *j = job.get();
      job->text = std::make_unique<TextStream>(
          *tok, prepared.request.prompt,
          [j](const std::string &piece) {
            j->pendingText += piece;
            j->wholeText += piece;
          },
          prepared.stops);
    }
    // The engine's thread hands each token and the end to this thread.
    auto self = shared_from_this();
    uint64_t serial = job->serial;
    auto ex = stream_.get_executor();
    JobSink sink{
        [self, serial, ex](int32_t token) {
          asio::post(ex,
                     [self, serial, token] { self->onToken(serial, token); });
        },
        [self, serial, ex](const JobEnd &end) {
          asio::post(ex, [self, serial, end] { self->onEnd(serial, end); });
        }};
    auto ticket = job->engine->submit(std::move(prepared.request), sink);
    if (!ticket.ok())
      return refuse(
          {429, "queue_full", "", std::string(ticket.status().message())}, 1);
    job->ticket = *ticket;
    job_ = std::move(job);
    ++server_.busy_;
    counted_ = true;
    if (fallback) {
      server_.metrics_.add("kiln_fallback_requests_total", {});
      fallbackHeader_ = model.info.name;
    }
    if (job_->stream) {
      http::response<http::empty_body> res{http::status::ok, 11};
      res.set(http::field::content_type, "text/event-stream");
      res.set(http::field::cache_control, "no-cache");
      res.chunked(true);
      res.keep_alive(keepAlive_);
      head(res);
      send(headerText(res));
    }
    watch();
  }

  void onToken(uint64_t serial, int32_t token) {
    if (!job_ || job_->serial != serial || job_->finished)
      return;
    Job &j = *job_;
    j.tokens.push_back(token);
    j.pendingIds.push_back(token);
    if (j.text && !j.text->add(token)) {
      // A stop string: the text ends before it, the generation now.
      j.engine->cancel(j.ticket, absl::CancelledError("a stop string"));
      return finish("stop");
    }
    if (j.stream && (!j.pendingText.empty() || !j.text)) {
      send(chunk(chunkEvent(j.head, j.pendingText, j.pendingIds, j.first,
                            std::nullopt, std::nullopt)));
      j.first = false;
      j.head.promptIds.clear(); // in the first chunk only
      j.pendingText.clear();
      j.pendingIds.clear();
    }
  }

  void onEnd(uint64_t serial, const JobEnd &end) {
    if (!job_ || job_->serial != serial || job_->finished)
      return;
    if (!end.status.ok())
      return fail(errorOf(end.status));
    if (job_->text)
      job_->text->finish();
    finish(end.length ? "length" : "stop");
  }

  void finish(const std::string &reason) {
    Job &j = *job_;
    j.finished = true;
    Usage usage{j.promptTokens, int64_t(j.tokens.size())};
    if (j.stream) {
      std::string last = chunkEvent(j.head, j.pendingText, j.pendingIds,
                                    j.first, reason, usage);
      if (j.includeUsage)
        last += usageEvent(j.head, usage);
      send(chunk(last + kDoneEvent) + chunk(""));
    } else {
      http::response<http::string_body> res{http::status::ok, 11};
      res.set(http::field::content_type, "application/json");
      res.body() = completionBody(j.head, j.wholeText, j.tokens, reason, usage);
      res.keep_alive(keepAlive_);
      head(res);
      res.prepare_payload();
      send(messageText(res));
    }
    log(200,
        absl::StrFormat("%d prompt + %d tokens in %.3f s (%s)", usage.prompt,
                        usage.completion, secondsSince(j.started), reason));
    responseDone();
  }

  /// A generation that failed after it was accepted.
  void fail(const ApiError &e) {
    Job &j = *job_;
    j.finished = true;
    server_.error(e);
    if (j.stream) { // the status line is gone: an error event ends it
      send(chunk(absl::StrCat("data: ", errorBody(e), "\n", kDoneEvent)) +
           chunk(""));
    } else {
      http::response<http::string_body> res{http::status(e.status), 11};
      res.set(http::field::content_type, "application/json");
      res.body() = errorBody(e);
      res.keep_alive(keepAlive_);
      head(res);
      res.prepare_payload();
      send(messageText(res));
    }
    log(e.status, e.message);
    responseDone();
  }

  /// A request refused before it ran.
  void refuse(const ApiError &e, double retryAfter = 0) {
    server_.error(e);
    http::response<http::string_body> res{http::status(e.status), 11};
    res.set(http::field::content_type, "application/json");
    if (retryAfter > 0)
      res.set(http::field::retry_after,
              std::to_string(int64_t(std::ceil(retryAfter))));
    res.body() = errorBody(e);
    res.keep_alive(keepAlive_);
    res.prepare_payload();
    send(messageText(res));
    log(e.status, e.message);
    responseDone();
  }

  void respond(int status, std::string body, const char *type) {
    http::response<http::string_body> res{http::status(status), 11};
    res.set(http::field::content_type, type);
    res.body() = std::move(body);
    res.keep_alive(keepAlive_);
    res.prepare_payload();
    send(messageText(res));
    responseDone();
  }

  template <class Message> void head(Message &res) {
    res.set(http::field::server, "kiln");
    if (!fallbackHeader_.empty())
      res.set("X-Kiln-Fallback", fallbackHeader_);
  }
  template <class Message> static std::string messageText(Message &res) {
    std::ostringstream out;
    out << res;
    return out.str();
  }
  static std::string headerText(http::response<http::empty_body> &res) {
    std::ostringstream out;
    out << res.base();
    return out.str();
  }

  void log(int status, const std::string &detail) {
    std::string model = job_ ? absl::StrCat(" ", job_->head.model) : "";
    std::fprintf(stderr, "kiln serve: %d %s%s: %s\n", status, what_.c_str(),
                 model.c_str(), detail.c_str());
  }

  // Writes, one at a time, in order.
  void send(std::string bytes) {
    if (closed_)
      return;
    outbox_.push_back(std::move(bytes));
    if (!writing_)
      write();
  }
  void write() {
    writing_ = true;
    asio::async_write(stream_, asio::buffer(outbox_.front()),
                      [self = shared_from_this()](
                          beast::error_code ec, size_t) { self->onWrite(ec); });
  }
  void onWrite(beast::error_code ec) {
    writing_ = false;
    if (ec)
      return gone();
    outbox_.pop_front();
    if (!outbox_.empty())
      return write();
    if (done_)
      next();
  }

  /// The response is complete (perhaps not yet written).
  void responseDone() {
    done_ = true;
    if (!writing_ && outbox_.empty())
      next();
  }

  /// After a whole response is written: the next request, or the end.
  void next() {
    done_ = false;
    uncount();
    job_.reset();
    fallbackHeader_.clear();
    if (!keepAlive_)
      return watching_ ? close() : linger();
    if (watching_) { // its handler reads on once it is cancelled
      stream_.socket().cancel();
      return;
    }
    read();
  }

  /// While a generation runs, a read that ends only when the client
  /// closes (bytes of a next request are kept for it).
  void watch() {
    watching_ = true;
    stream_.socket().async_read_some(
        buffer_.prepare(4096),
        [self = shared_from_this()](beast::error_code ec, size_t n) {
          self->onWatch(ec, n);
        });
  }
  void onWatch(beast::error_code ec, size_t n) {
    watching_ = false;
    bool running = job_ && !job_->finished;
    if (!ec) {
      buffer_.commit(n);
      if (running && buffer_.size() < (64 << 10))
        return watch();
      if (!running && !done_)
        return read();
      return;
    }
    if (ec == asio::error::operation_aborted && !running && !done_)
      return read(); // next() cancelled it to read the next request
    gone();
  }

  /// The client left: its generation ends now, its KV blocks with it.
  void gone() {
    if (job_ && !job_->finished) {
      job_->engine->cancel(job_->ticket,
                           absl::CancelledError("the client disconnected"));
      job_->finished = true;
      server_.error({499, "client_disconnected", "", ""});
      log(499, absl::StrFormat("the client left after %d tokens",
                               job_->tokens.size()));
    }
    close();
  }

  /// The last response is written: no more is sent, and what the client
  /// still sends (the rest of a body too large) is read and dropped for
  /// up to 2 s, so that the close does not reset the connection (which
  /// would lose the response the client has not yet read).
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    discard();
  }
  void discard() {
    buffer_.clear();
    stream_.async_read_some(
        buffer_.prepare(64 << 10),
        [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec) // the client's end, or the 2 s
            return self->close();
          self->discard();
        });
  }

  /// A drain waits for every generation's response to be written (or its
  /// client gone).
  void uncount() {
    if (!counted_)
      return;
    counted_ = false;
    --server_.busy_;
    server_.checkDrained();
  }

  void close() {
    uncount();
    if (closed_)
      return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  Server &server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<Job> job_;
  uint64_t serials_ = 0;
  int64_t requests_ = 0;
  std::string what_, fallbackHeader_;
  std::deque<std::string> outbox_;
  bool keepAlive_ = true, writing_ = false, watching_ = false;
  bool done_ = false, closed_ = false;
  bool counted_ = false; // in the server's busy_
};

Server::Server(asio::io_context &io, const ServeOptions &options,
               Metrics &metrics)
    : io_(io), options_(options), metrics_(metrics),
      limiter_(options.rateLimit), acceptor_(io), drainTimer_(io),
      created_(unixSeconds()) {}

absl::StatusOr<tcp::endpoint> Server::listen() {
  beast::error_code ec;
  auto address = asio::ip::make_address(options_.host, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("--host: '", options_.host, "' is not an IP address"));
  tcp::endpoint at(address, uint16_t(options_.port));
  acceptor_.open(at.protocol(), ec);
  if (!ec)
    acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec)
    acceptor_.bind(at, ec);
  if (!ec)
    acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.host, ":", options_.port,
                     ": ", ec.message()));
  accept();
  return acceptor_.local_endpoint();
}

void Server::accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket s) {
    if (ec) // the acceptor closed (a drain), or out of descriptors
      return ec == asio::error::operation_aborted ? void() : accept();
    std::make_shared<Session>(std::move(s), *this)->start();
    accept();
  });
}

void Server::ready(ServedModel *main, ServedModel *fallback) {
  main_ = main;
  fallback_ = fallback;
  if (state_ == State::Loading)
    state_ = State::Ready;
  else
    checkDrained();
}

std::optional<ApiError> Server::admit(const std::string &authorization,
                                      double &retryAfter) {
  if (state_ == State::Loading)
    return ApiError{503, "loading", "", "the model is still loading"};
  if (state_ == State::Draining)
    return ApiError{503, "server_shutting_down", "",
                    "the server is shutting down"};
  std::string key;
  if (!options_.apiKeys.empty()) {
    const std::string bearer = "Bearer ";
    if (authorization.rfind(bearer, 0) == 0)
      key = authorization.substr(bearer.size());
    if (std::find(options_.apiKeys.begin(), options_.apiKeys.end(), key) ==
        options_.apiKeys.end())
      return ApiError{401, "invalid_api_key", "",
                      key.empty() ? "no API key: send 'Authorization: Bearer "
                                    "KEY'"
                                  : "the API key is not one of this server's"};
  }
  if (double wait = limiter_.take(key); wait > 0) {
    retryAfter = wait;
    return ApiError{429, "rate_limit_exceeded", "",
                    absl::StrFormat("more than %g requests a second; retry "
                                    "in %.2f s",
                                    options_.rateLimit.qps, wait)};
  }
  return std::nullopt;
}

std::optional<ApiError> Server::pick(const std::string &name,
                                     ServedModel *&model, bool &fallback) {
  fallback = false;
  if (fallback_ && name == fallback_->info.name) {
    model = fallback_;
    return std::nullopt;
  }
  if (!name.empty() && name != main_->info.name)
    return ApiError{404, "model_not_found", "model",
                    absl::StrCat("the model '", name,
                                 "' does not exist; this server has '",
                                 main_->info.name, "'")};
  model = main_;
  Engine &main = *main_->engine;
  bool busy = main.waiting() * 5 > main.capacity() * 4; // above 80%
  bool healthy = main.health().healthy;
  if (fallback_ && (busy || !healthy)) {
    model = fallback_;
    fallback = true;
  } else if (!healthy) {
    return ApiError{
        503, "device_unhealthy", "",
        absl::StrCat("the device is unhealthy: ", main.health().why)};
  }
  return std::nullopt;
}

std::pair<int, std::string> Server::health() const {
  nlohmann::json body;
  int status = 200;
  switch (state_) {
  case State::Loading:
    body = {{"status", "loading"}};
    status = 503;
    break;
  case State::Draining:
    body = {{"status", "draining"}};
    status = 503;
    break;
  case State::Ready:
    body = {{"status", "ok"}};
    break;
  }
  if (main_) {
    body["model"] = main_->info.name;
    Health h = main_->engine->health();
    if (!h.healthy && state_ == State::Ready) {
      body["status"] = "unhealthy";
      body["reason"] = h.why;
      status = 503;
    }
    body["running"] = main_->engine->running();
    body["waiting"] = main_->engine->waiting();
  }
  if (fallback_)
    body["fallback"] = {{"model", fallback_->info.name},
                        {"healthy", fallback_->engine->health().healthy}};
  return {status, body.dump() + "\n"};
}

std::string Server::modelsList() const {
  std::vector<std::string> names = {main_->info.name};
  if (fallback_)
    names.push_back(fallback_->info.name);
  return modelsBody(names, created_);
}

void Server::error(const ApiError &e) {
  metrics_.add("kiln_errors_total",
               {{"kind", e.code.empty() ? std::to_string(e.status) : e.code}});
}

void Server::drain() {
  if (state_ == State::Draining)
    return;
  bool loading = state_ == State::Loading;
  state_ = State::Draining;
  std::fprintf(stderr,
               "kiln serve: draining: running requests have %g s to finish\n",
               options_.drainSeconds);
  beast::error_code ignored;
  acceptor_.close(ignored);
  if (loading) // nothing can be running
    return io_.stop();
  drainDeadline_ =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options_.drainSeconds));
  checkDrained();
}

void Server::checkDrained() {
  if (state_ != State::Draining)
    return;
  if (busy_ == 0) {
    std::fprintf(stderr, "kiln serve: drained\n");
    return io_.stop();
  }
  if (!cancelled_ && Clock::now() >= drainDeadline_) {
    cancelled_ = true;
    std::fprintf(stderr,
                 "kiln serve: %lld requests still running after %g s: "
                 "cancelled\n",
                 (long long)busy_, options_.drainSeconds);
    absl::Status why =
        absl::CancelledError("the server is shutting down (drain time over)");
    for (ServedModel *m : {main_, fallback_})
      if (m)
        m->engine->cancelAll(why);
  }
  // Look again shortly: the deadline, or the cancelled requests' ends.
  drainTimer_.expires_after(std::chrono::milliseconds(50));
  drainTimer_.async_wait([this](beast::error_code ec) {
    if (!ec)
      checkDrained();
  });
}

} // namespace kiln::serve
