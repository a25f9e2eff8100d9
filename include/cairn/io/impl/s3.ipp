// Definitions of <cairn/io/s3.hpp>: inline in a header-only build, compiled once by
// <cairn/src.hpp> with CAIRN_SEPARATE_COMPILATION.
#pragma once

#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>
#include <cairn/io/s3.hpp>
#include <cairn/io/storage.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <curl/curl.h>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <openssl/evp.h>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace cairn::io::detail {

inline constexpr std::uint64_t s3_mib = std::uint64_t{1} << 20;
inline constexpr std::uint64_t s3_min_part = 5 * s3_mib;             // S3's least part, but the last
inline constexpr std::uint64_t s3_max_part = std::uint64_t{5} << 30; // and its largest
inline constexpr std::uint64_t s3_max_parts = 10000;

/// `text` percent-encoded as Signature V4 wants: unreserved characters kept, and '/' when
/// `keep_slash` (a key's path), every other byte as %XX in upper case.
inline std::string s3_encode(std::string_view text, bool keep_slash) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

/// The text of each `<tag>…</tag>` in `xml`, in order, with XML's entities decoded. S3's
/// answers are flat documents of a few named elements; this reads those and nothing else.
inline std::vector<std::string> xml_values(std::string_view xml, std::string_view tag) {
  std::vector<std::string> out;
  std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  for (std::size_t at = xml.find(open); at != std::string_view::npos; at = xml.find(open, at)) {
    auto begin = at + open.size();
    auto end = xml.find(close, begin);
    if (end == std::string_view::npos) break;
    auto raw = xml.substr(begin, end - begin);
    std::string text;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        text += raw[i];
        continue;
      }
      auto semi = raw.find(';', i);
      if (semi == std::string_view::npos) {
        text += raw.substr(i);
        break;
      }
      auto entity = raw.substr(i + 1, semi - i - 1);
      if (entity == "amp")
        text += '&';
      else if (entity == "lt")
        text += '<';
      else if (entity == "gt")
        text += '>';
      else if (entity == "quot")
        text += '"';
      else if (entity == "apos")
        text += '\'';
      else if (entity.starts_with("#")) {
        unsigned long code = 0;
        bool hex = entity.size() > 1 && (entity[1] == 'x' || entity[1] == 'X');
        auto digits = entity.substr(hex ? 2 : 1);
        auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), code, hex ? 16 : 10);
        if (ec != std::errc() || p != digits.data() + digits.size() || code > 0x10FFFF) {
          text += std::string(raw.substr(i, semi - i + 1));
        } else if (code < 0x80) {
          text += static_cast<char>(code);
        } else if (code < 0x800) {
          text += static_cast<char>(0xC0 | (code >> 6));
          text += static_cast<char>(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
          text += static_cast<char>(0xE0 | (code >> 12));
          text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          text += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          text += static_cast<char>(0xF0 | (code >> 18));
          text += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
          text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          text += static_cast<char>(0x80 | (code & 0x3F));
        }
      } else {
        text += std::string(raw.substr(i, semi - i + 1));
      }
      i = semi;
    }
    out.push_back(std::move(text));
    at = end + close.size();
  }
  return out;
}

/// The raw inner text of each `<tag>…</tag>` (entities left as they are): a block to read values in.
inline std::vector<std::string_view> xml_blocks(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  for (std::size_t at = xml.find(open); at != std::string_view::npos; at = xml.find(open, at)) {
    auto begin = at + open.size();
    auto end = xml.find(close, begin);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(begin, end - begin));
    at = end + close.size();
  }
  return out;
}

inline std::string xml_first(std::string_view xml, std::string_view tag) {
  auto values = xml_values(xml, tag);
  return values.empty() ? std::string() : std::move(values.front());
}

inline std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// The base64 of the MD5 of `bytes`: a Content-MD5 header's value, which the store checks the
/// body against.
inline std::string md5_of(std::span<std::byte const> bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_md5(), nullptr) != 1)
    throw error(io_errc::storage, "OpenSSL cannot compute MD5 (a FIPS-only libcrypto?)");
  return {reinterpret_cast<char const*>(digest), length};
}

inline std::string content_md5(std::span<std::byte const> bytes) {
  auto digest = md5_of(bytes);
  unsigned char encoded[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  int n =
      EVP_EncodeBlock(encoded, reinterpret_cast<unsigned char const*>(digest.data()), static_cast<int>(digest.size()));
  return {reinterpret_cast<char const*>(encoded), static_cast<std::size_t>(n)};
}

/// The ETag S3 gives an object completed from parts of ETags `parts` (each the hex MD5 of its
/// part): the MD5 of their digests, then '-' and their count; empty when one is not an MD5.
inline std::string multipart_etag(std::vector<std::string> const& parts) {
  std::string digests;
  for (auto part : parts) {
    if (part.size() == 34 && part.front() == '"' && part.back() == '"') part = part.substr(1, 32);
    if (part.size() != 32) return {};
    for (std::size_t i = 0; i < 32; i += 2) {
      char* end = nullptr;
      auto pair = part.substr(i, 2);
      auto value = std::strtoul(pair.c_str(), &end, 16);
      if (end != pair.c_str() + 2) return {};
      digests += static_cast<char>(value);
    }
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : md5_of(std::as_bytes(std::span(digests)))) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out + "-" + std::to_string(parts.size());
}

inline void s3_global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

/// One request: what to send, where the answer goes.
struct s3_request {
  s3_request(char const* operation_name, char const* http_method, std::string object_key)
      : operation(operation_name), method(http_method), key(std::move(object_key)) {}

  char const* operation; // for messages: GET, PUT, HEAD, DELETE, LIST, …
  char const* method;
  std::string key;
  std::string subject;                                    // what messages name, when not the key (a listing's prefix)
  std::vector<std::pair<std::string, std::string>> query; // sorted by name by the caller
  std::vector<std::string> headers;
  std::span<std::byte const> body;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> range; // first byte, length
  std::span<std::byte> into;                                    // a ranged read's destination
  std::uint64_t text_limit = std::uint64_t{64} << 20;           // an answer read as text
  std::vector<long> accepted = {200};                           // statuses that are success
  std::vector<long> expected_failures;                          // returned, not thrown
  // Before a failed request is sent again: whether the store did it anyway (then it is not sent
  // again, and answers the first accepted status). For requests that cannot be done twice (a
  // completion, a conditional create), whose answer may have been lost: libcurl itself sends a
  // request again, unseen, when a reused connection dies before answering, and the second
  // answer then says the first was done (a completed upload's id is gone).
  std::function<bool()> done_already;
};

struct s3_response {
  long status = 0;
  std::string text; // the body, unless it went to `into`
  std::uint64_t received = 0;
  std::string etag;
  std::optional<std::uint64_t> content_length;
  bool too_large = false;
  int attempts = 1; // more when earlier ones were retried
};

class s3_client {
public:
  s3_client(std::string bucket, s3_settings settings) : bucket_(std::move(bucket)), settings_(std::move(settings)) {
    s3_global_init();
    if (!settings_.endpoint.empty()) {
      auto endpoint = settings_.endpoint;
      while (endpoint.ends_with('/')) endpoint.pop_back();
      base_ = endpoint + "/" + bucket_;
    } else {
      base_ = "https://" + bucket_ + ".s3." + settings_.region + ".amazonaws.com";
    }
    signing_ = "aws:amz:" + settings_.region + ":s3";
  }
  s3_client(s3_client const&) = delete;
  s3_client& operator=(s3_client const&) = delete;
  ~s3_client() {
    if (owner_ == ::getpid())
      for (auto* handle : idle_) curl_easy_cleanup(handle);
  }

  [[nodiscard]] std::string const& bucket() const noexcept { return bucket_; }
  [[nodiscard]] s3_settings const& settings() const noexcept { return settings_; }
  [[nodiscard]] std::string describe(std::string_view key) const { return "s3://" + bucket_ + "/" + std::string(key); }

  [[nodiscard]] s3_statistics statistics() const noexcept {
    return {requests_.load(), retries_.load(), sent_.load(), received_.load()};
  }

  /// Sends `request`, retrying what may pass (a 5xx, SlowDown, a reset, a timeout) with
  /// exponential backoff and full jitter, for at most `retry_seconds` in all.
  s3_response perform(s3_request& request) {
    using clock = std::chrono::steady_clock;
    auto start = clock::now();
    thread_local std::mt19937_64 random(std::random_device{}());
    for (int attempt = 1;; ++attempt) {
      CURLcode transfer = CURLE_OK;
      char transfer_text[CURL_ERROR_SIZE] = {};
      auto response = once(request, transfer, transfer_text);
      bool ok = transfer == CURLE_OK &&
                std::find(request.accepted.begin(), request.accepted.end(), response.status) != request.accepted.end();
      if (ok && request.into.data() && response.received != request.into.size() && !response.too_large) {
        // All the body the store meant to send, and short: the object ends before the range does.
        if (response.content_length && *response.content_length == response.received)
          throw io_error(describe(request.key), "read past the end of the object (" +
                                                    std::to_string(response.received) + " of " +
                                                    std::to_string(request.into.size()) + " bytes there)");
        transfer = CURLE_PARTIAL_FILE; // a short body: an answer cut off
        std::snprintf(transfer_text, sizeof transfer_text, "%llu of %zu bytes received",
                      static_cast<unsigned long long>(response.received), request.into.size());
        ok = false;
      }
      response.attempts = attempt;
      if (ok) return response;
      if (transfer == CURLE_OK && std::find(request.expected_failures.begin(), request.expected_failures.end(),
                                            response.status) != request.expected_failures.end())
        return response;
      std::string code = transfer != CURLE_OK
                             ? std::string(transfer_text[0] ? transfer_text : curl_easy_strerror(transfer))
                             : xml_first(response.text, "Code");
      bool retry = transfer != CURLE_OK ? retryable(transfer)
                                        : response.status >= 500 || response.status == 429 || response.status == 408 ||
                                              code == "SlowDown" || code == "RequestTimeout" || code == "BadDigest" ||
                                              code == "InternalError";
      // A refusal (503 SlowDown, 429, …) did nothing; no answer or an internal error may have.
      if (retry && request.done_already && (transfer != CURLE_OK || response.status == 500)) {
        bool done = false;
        try {
          done = request.done_already();
        } catch (std::exception const&) { // not known: sent again
        }
        if (done) {
          s3_response answered;
          answered.status = request.accepted.front();
          answered.attempts = attempt;
          return answered;
        }
      }
      double elapsed = std::chrono::duration<double>(clock::now() - start).count();
      double ceiling = std::min(5.0, 0.05 * static_cast<double>(std::uint64_t{1} << std::min(attempt, 16)));
      double wait = std::uniform_real_distribution<double>(0.0, ceiling)(random);
      if (retry && elapsed + wait < settings_.retry_seconds) {
        ++retries_;
        std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        continue;
      }
      std::string message = std::string(request.operation) + " failed: ";
      if (transfer != CURLE_OK) {
        message += "no answer from " + host() + " (" + code + ")";
      } else {
        message += "HTTP " + std::to_string(response.status);
        if (!code.empty()) message += " " + code;
        auto text = xml_first(response.text, "Message");
        if (!text.empty()) message += " (" + text + ")";
      }
      if (attempt > 1) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f", elapsed);
        message += ", after " + std::to_string(attempt) + " attempts in " + seconds + " s";
        if (retry)
          message += " (CAIRN_S3_RETRY_SECONDS=" + std::to_string(static_cast<long>(settings_.retry_seconds)) + ")";
      }
      if (response.status == 403) message += "; credentials from " + settings_.credentials_source;
      throw s3_error(describe(request.subject.empty() ? request.key : request.subject), request.operation,
                     transfer != CURLE_OK ? 0 : response.status,
                     transfer != CURLE_OK ? std::string("transfer: ") + code : code, message);
    }
  }

private:
  [[nodiscard]] std::string host() const {
    auto text = base_.substr(base_.find("://") + 3);
    text = text.substr(0, text.find('/'));
    if (auto at = text.rfind('@'); at != std::string::npos) text = text.substr(at + 1); // never a user:password
    return text;
  }

  static bool retryable(CURLcode code) {
    switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
    }
  }

  struct transfer_state {
    s3_request* request;
    s3_response* response;
    std::size_t sent = 0;
  };

  static std::size_t on_body(char* data, std::size_t, std::size_t n, void* user) {
    auto& state = *static_cast<transfer_state*>(user);
    auto& response = *state.response;
    auto& request = *state.request;
    bool success = response.status >= 200 && response.status < 300;
    if (request.into.data() && success) {
      if (response.received + n > request.into.size()) return 0; // more than asked: fail the transfer
      std::memcpy(request.into.data() + response.received, data, n);
    } else {
      // An error's answer is read up to 64 KiB whatever the caller's limit: its code is in it.
      auto limit = success ? request.text_limit : std::uint64_t{64} << 10;
      if (response.text.size() + n > limit) {
        response.too_large = success;
        if (!success) return n; // the rest of an error's answer is dropped
        return 0;
      }
      response.text.append(data, n);
    }
    response.received += n;
    return n;
  }

  static std::size_t on_header(char* data, std::size_t, std::size_t n, void* user) {
    auto& response = *static_cast<transfer_state*>(user)->response;
    std::string_view line(data, n);
    if (line.starts_with("HTTP/")) { // a new response (after a 100 Continue): start over
      auto space = line.find(' ');
      if (space != std::string_view::npos) response.status = std::strtol(line.data() + space + 1, nullptr, 10);
      response.etag.clear();
      response.content_length.reset();
      return n;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos) return n;
    std::string name(line.substr(0, colon));
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
      value.remove_suffix(1);
    if (name == "etag") response.etag = std::string(value);
    if (name == "content-length") {
      std::uint64_t length = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (ec == std::errc() && p == value.data() + value.size()) response.content_length = length;
    }
    return n;
  }

  static std::size_t on_read(char* buffer, std::size_t size, std::size_t count, void* user) {
    auto& state = *static_cast<transfer_state*>(user);
    auto body = state.request->body;
    std::size_t n = std::min(size * count, body.size() - state.sent);
    std::memcpy(buffer, body.data() + state.sent, n);
    state.sent += n;
    return n;
  }

  CURL* take() {
    {
      std::lock_guard lock(mutex_);
      if (owner_ != ::getpid()) {
        // A process forked after its parent used the store: the idle handles' connections are
        // the parent's sockets (two processes writing one would mix their requests and steal
        // each other's answers). Never used here, nor closed (closing a TLS one writes to it).
        idle_.clear();
        owner_ = ::getpid();
      }
      if (!idle_.empty()) {
        auto* handle = idle_.back();
        idle_.pop_back();
        return handle;
      }
    }
    auto* handle = curl_easy_init();
    if (!handle) throw error(io_errc::storage, "libcurl cannot start a transfer (out of memory?)");
    return handle;
  }
  void give_back(CURL* handle) {
    std::lock_guard lock(mutex_);
    idle_.push_back(handle);
  }

  s3_response once(s3_request& request, CURLcode& code, char* error_text) {
    ++requests_;
    s3_response response;
    transfer_state state{&request, &response};
    auto* handle = take();
    struct returner {
      s3_client* client;
      CURL* handle;
      curl_slist* headers = nullptr;
      ~returner() {
        curl_slist_free_all(headers);
        curl_easy_reset(handle);
        client->give_back(handle);
      }
    } hold{this, handle};

    std::string url = base_ + "/" + s3_encode(request.key, true);
    if (!request.query.empty()) {
      char separator = '?';
      for (auto const& [name, value] : request.query) {
        url += separator;
        url += s3_encode(name, false) + "=" + s3_encode(value, false);
        separator = '&';
      }
    }
    // The payload is not hashed into the signature (its integrity is Content-MD5's), and sent
    // plain: never aws-chunked, which S3-compatible stores mishandle.
    auto add = [&](std::string const& header) { hold.headers = curl_slist_append(hold.headers, header.c_str()); };
    add("x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!settings_.session_token.empty()) add("x-amz-security-token: " + settings_.session_token);
    for (auto const& header : request.headers) add(header);
    if (request.range)
      add("Range: bytes=" + std::to_string(request.range->first) + "-" +
          std::to_string(request.range->first + request.range->second - 1));

    curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_text);
    curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, signing_.c_str());
    curl_easy_setopt(handle, CURLOPT_USERNAME, settings_.access_key_id.c_str());
    curl_easy_setopt(handle, CURLOPT_PASSWORD, settings_.secret_access_key.c_str());
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, hold.headers);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &state);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &state);
    auto timeout = static_cast<long>(std::max(1.0, settings_.request_timeout));
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, std::min(timeout, 10L));
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, timeout);
    std::string_view method = request.method;
    if (method == "HEAD") {
      curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
    } else if (method == "PUT") {
      curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(handle, CURLOPT_READFUNCTION, &on_read);
      curl_easy_setopt(handle, CURLOPT_READDATA, &state);
      curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    } else if (method == "POST") {
      curl_easy_setopt(handle, CURLOPT_POST, 1L);
      curl_easy_setopt(handle, CURLOPT_POSTFIELDS,
                       request.body.data() ? reinterpret_cast<char const*>(request.body.data()) : "");
      curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    } else if (method != "GET") {
      curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request.method);
    }
    code = curl_easy_perform(handle);
    if (code == CURLE_WRITE_ERROR && response.too_large) code = CURLE_OK;
    long status = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    response.status = status;
    sent_ += state.sent + (method == "POST" ? request.body.size() : 0);
    received_ += response.received;
    return response;
  }

  std::string bucket_;
  s3_settings settings_;
  std::string base_;
  std::string signing_;
  std::mutex mutex_;
  std::vector<CURL*> idle_;
  pid_t owner_ = ::getpid(); ///< the process whose connections the idle handles hold
  std::atomic<std::uint64_t> requests_{0}, retries_{0}, sent_{0}, received_{0};
};

/// The part size of the `index`-th part (from 0) of an object of unknown size: 8 MiB for the
/// first 1,000 parts, then 16, 32 and 64 MiB (up to 504 GiB in S3's 10,000 parts).
inline std::uint64_t s3_part_size(s3_settings const& settings, std::uint64_t index) {
  if (settings.part_size) return settings.part_size;
  auto step = std::min<std::uint64_t>(index / 1000, 3);
  return (8 * s3_mib) << step;
}

class s3_storage;

/// A multipart upload fed front to back: each full part is sent on a thread of its own, at
/// most `parts_in_flight` at once, so that what waits in memory is that many parts. The first
/// part (at least `held` bytes) is kept until the commit, so that its bytes can be rewritten
/// (`write_at`: a safetensors header's checksums, known last); an object that fits in it is one
/// PUT.
class s3_writer final : public object_writer {
public:
  s3_writer(std::shared_ptr<s3_client> client, std::string key, std::uint64_t held)
      : client_(std::move(client)), key_(std::move(key)),
        first_limit_(std::max(held, s3_part_size(client_->settings(), 0))) {}
  s3_writer(s3_writer const&) = delete;
  s3_writer& operator=(s3_writer const&) = delete;
  ~s3_writer() override {
    if (committed_) return;
    for (auto& part : in_flight_) part.wait();
    if (!upload_id_.empty()) abort_upload();
  }

  void write(std::span<std::byte const> bytes) override {
    while (!bytes.empty()) {
      if (first_.size() < first_limit_ && parts_started_ == 0) {
        auto n = std::min<std::size_t>(bytes.size(), static_cast<std::size_t>(first_limit_ - first_.size()));
        first_.insert(first_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
        bytes = bytes.subspan(n);
        size_ += n;
        if (first_.size() == first_limit_) parts_started_ = 1; // part 1, sent at the commit
        continue;
      }
      auto want = s3_part_size(client_->settings(), parts_started_);
      if (buffer_.capacity() < want) buffer_.reserve(want);
      auto n = std::min<std::size_t>(bytes.size(), want - buffer_.size());
      buffer_.insert(buffer_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      bytes = bytes.subspan(n);
      size_ += n;
      if (buffer_.size() == want) send_part(std::move(buffer_));
    }
  }

  void write_at(std::span<std::byte const> bytes, std::uint64_t offset) override {
    if (offset == size_) return write(bytes);
    if (offset + bytes.size() <= first_.size()) {
      std::memcpy(first_.data() + offset, bytes.data(), bytes.size());
      return;
    }
    throw io_error(client_->describe(key_), io_errc::invalid_argument,
                   "an object is written front to back: bytes at " + std::to_string(offset) + " after " +
                       std::to_string(size_) + " (only its first " + std::to_string(first_.size()) +
                       " bytes can be rewritten)");
  }

  void commit() override {
    if (committed_) return;
    if (upload_id_.empty() && buffer_.empty()) { // one request for an object of one part
      s3_request request("PUT", "PUT", key_);
      request.body = first_;
      request.headers.push_back("Content-MD5: " + content_md5(first_));
      client_->perform(request);
      committed_ = true;
      return;
    }
    if (!buffer_.empty()) send_part(std::move(buffer_));
    wait_for_slot();
    // Its beginning, to know the object again should the completion's answer be lost.
    opening_.assign(first_.begin(),
                    first_.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(first_.size(), opening_size)));
    auto first = send(1, std::make_shared<std::vector<std::byte>>(std::move(first_)));
    std::string body = "<CompleteMultipartUpload>";
    auto add = [&](std::uint64_t number, std::string const& etag) {
      body +=
          "<Part><PartNumber>" + std::to_string(number) + "</PartNumber><ETag>" + xml_escape(etag) + "</ETag></Part>";
    };
    std::vector<std::string> etags{first.get()}; // rethrows a part's failure
    for (auto& part : in_flight_) etags.push_back(part.get());
    in_flight_.clear();
    for (std::size_t i = 0; i < etags.size(); ++i) add(i + 1, etags[i]);
    body += "</CompleteMultipartUpload>";
    s3_request request("CompleteMultipartUpload", "POST", key_);
    request.query = {{"uploadId", upload_id_}};
    request.body = std::as_bytes(std::span(body));
    request.headers = {"Content-Type: application/xml", "Content-MD5: " + content_md5(request.body)};
    request.expected_failures = {404};
    request.done_already = [&] { return completed_before(etags); };
    auto response = client_->perform(request);
    if (response.status == 404) {
      // A completion sent again after its answer was lost (by cairn, or by libcurl unseen): the
      // first one completed the upload, which the store then no longer knows. It did when the
      // object is there with this writer's size and the ETag these parts give.
      if (completed_before(etags)) {
        committed_ = true;
        return;
      }
      auto code = xml_first(response.text, "Code");
      throw s3_error(client_->describe(key_), "CompleteMultipartUpload", response.status, code,
                     "CompleteMultipartUpload failed: HTTP 404 " + code + " (" + xml_first(response.text, "Message") +
                         ")");
    }
    // A completion can fail after its 200 has started: the error is then in the body.
    auto code = xml_first(response.text, "Code");
    if (response.text.find("<Error>") != std::string::npos || !code.empty())
      throw s3_error(client_->describe(key_), "CompleteMultipartUpload", response.status, code,
                     "CompleteMultipartUpload failed: " + code + " (" + xml_first(response.text, "Message") + ")");
    committed_ = true;
  }

  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }

private:
  /// Whether the object is the one these parts make: this writer's size, and the ETag S3 gives
  /// an object of these parts, or (a store with ETags of its own) this writer's first bytes.
  bool completed_before(std::vector<std::string> const& etags) {
    s3_request head("HEAD", "HEAD", key_);
    head.expected_failures = {404};
    auto response = client_->perform(head);
    if (response.status != 200 || response.content_length != size_) return false;
    auto etag = response.etag;
    if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
    if (auto expected = multipart_etag(etags); !expected.empty() && etag == expected) return true;
    std::vector<std::byte> opening(opening_.size());
    s3_request get("GET", "GET", key_);
    get.range = std::pair{std::uint64_t{0}, static_cast<std::uint64_t>(opening.size())};
    get.into = opening;
    get.accepted = {206};
    client_->perform(get);
    return opening == opening_;
  }

  void start_upload() {
    s3_request request("CreateMultipartUpload", "POST", key_);
    request.query = {{"uploads", ""}};
    auto response = client_->perform(request);
    upload_id_ = xml_first(response.text, "UploadId");
    if (upload_id_.empty())
      throw s3_error(client_->describe(key_), "CreateMultipartUpload", response.status, "",
                     "CreateMultipartUpload answered no UploadId");
  }

  /// Sends a full part (2, 3, …) once fewer than `parts_in_flight` are being sent; the failure
  /// of one sent before surfaces here.
  void send_part(std::vector<std::byte> part) {
    if (upload_id_.empty()) start_upload();
    if (parts_started_ >= s3_max_parts)
      throw io_error(client_->describe(key_), io_errc::too_large,
                     "more than 10,000 parts: set CAIRN_S3_PART_SIZE larger");
    wait_for_slot();
    auto number = ++parts_started_;
    in_flight_.push_back(send(number, std::make_shared<std::vector<std::byte>>(std::move(part))));
  }

  /// Waits until fewer than `parts_in_flight` parts are being sent; the failure of one sent
  /// before surfaces here.
  void wait_for_slot() {
    std::size_t running = 0;
    for (auto& sent : in_flight_)
      if (sent.wait_for(std::chrono::seconds(0)) != std::future_status::ready) ++running;
    if (running >= static_cast<std::size_t>(std::max(1, client_->settings().parts_in_flight))) {
      for (auto& sent : in_flight_)
        if (sent.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
          sent.wait();
          break;
        }
    }
    for (auto& sent : in_flight_)
      if (sent.wait_for(std::chrono::seconds(0)) == std::future_status::ready) (void)sent.get();
  }

  std::shared_future<std::string> send(std::uint64_t number, std::shared_ptr<std::vector<std::byte>> data) {
    return std::async(std::launch::async,
                      [client = client_, key = key_, id = upload_id_, number, data] {
                        s3_request request("UploadPart", "PUT", key);
                        request.query = {{"partNumber", std::to_string(number)}, {"uploadId", id}};
                        request.body = *data;
                        request.headers.push_back("Content-MD5: " + content_md5(*data));
                        auto response = client->perform(request);
                        if (response.etag.empty())
                          throw s3_error(client->describe(key), "UploadPart", response.status, "",
                                         "UploadPart " + std::to_string(number) + " answered no ETag");
                        return response.etag;
                      })
        .share();
  }

  void abort_upload() noexcept {
    try {
      s3_request request("AbortMultipartUpload", "DELETE", key_);
      request.query = {{"uploadId", upload_id_}};
      request.accepted = {200, 204, 404};
      request.expected_failures = {400, 405, 501}; // a store without it (s3rver): cleaned later
      client_->perform(request);
    } catch (...) {
      // An upload left behind holds no object: the next clean of its saves ends it (end_unfinished).
    }
  }

  std::shared_ptr<s3_client> client_;
  std::string key_;
  std::uint64_t first_limit_;
  std::string upload_id_;
  std::vector<std::byte> first_;
  static constexpr std::size_t opening_size = 64 << 10;
  std::vector<std::byte> opening_; // part 1's first bytes, kept once it is sent
  std::vector<std::byte> buffer_;
  std::vector<std::shared_future<std::string>> in_flight_;
  std::uint64_t parts_started_ = 0;
  std::uint64_t size_ = 0;
  bool committed_ = false;
};

class s3_storage final : public storage_backend {
public:
  s3_storage(std::string bucket, s3_settings settings)
      : client_(std::make_shared<s3_client>(std::move(bucket), std::move(settings))) {}

  [[nodiscard]] std::string describe(std::string_view key) const override { return client_->describe(key); }

  [[nodiscard]] backend_guarantees guarantees() const override {
    return {.atomic_rename = false,
            .conditional_create = client_->settings().conditional_create,
            .list_after_write = true,
            .directories = false,
            .shared_writes = false};
  }

  [[nodiscard]] std::optional<std::uint64_t> size(std::string_view key) override {
    s3_request request("HEAD", "HEAD", std::string(key));
    request.expected_failures = {404};
    auto response = client_->perform(request);
    if (response.status == 404) return std::nullopt;
    if (!response.content_length)
      throw s3_error(describe(key), "HEAD", response.status, "", "HEAD answered no Content-Length");
    return response.content_length;
  }

  void read(std::string_view key, std::uint64_t offset, std::span<std::byte> out) override {
    if (out.empty()) return;
    // A large range is read as several ranged GETs at once.
    auto const chunk = 16 * s3_mib;
    auto in_flight = static_cast<std::size_t>(std::max(1, client_->settings().parts_in_flight));
    if (out.size() <= 2 * chunk || in_flight == 1) return read_range(key, offset, out);
    std::deque<std::future<void>> running;
    for (std::size_t at = 0; at < out.size(); at += chunk) {
      if (running.size() >= in_flight) {
        running.front().get();
        running.pop_front();
      }
      auto piece = out.subspan(at, std::min<std::size_t>(chunk, out.size() - at));
      running.push_back(std::async(std::launch::async, [this, key = std::string(key), offset, at, piece] {
        read_range(key, offset + at, piece);
      }));
    }
    std::exception_ptr failure;
    for (auto& piece : running) try {
        piece.get();
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    if (failure) std::rethrow_exception(failure);
  }

  [[nodiscard]] std::string read_all(std::string_view key, std::uint64_t limit) override {
    s3_request request("GET", "GET", std::string(key));
    request.text_limit = limit;
    request.expected_failures = {404};
    auto response = client_->perform(request);
    if (response.status == 404)
      throw io_error(describe(key), std::make_error_code(std::errc::no_such_file_or_directory), "no such object");
    if (response.too_large)
      throw io_error(describe(key), io_errc::too_large, "larger than " + std::to_string(limit) + " bytes: refused");
    return std::move(response.text);
  }

  void write(std::string_view key, std::span<std::byte const> bytes) override {
    if (bytes.size() > s3_max_part) {
      auto writer = open_writer(key, 0);
      writer->write(bytes);
      writer->commit();
      return;
    }
    s3_request request("PUT", "PUT", std::string(key));
    request.body = bytes;
    request.headers.push_back("Content-MD5: " + content_md5(bytes));
    client_->perform(request);
  }

  /// Whether the object `key` holds exactly `bytes` (false when there is none, or a larger one:
  /// another writer's longer record).
  bool holds(std::string_view key, std::span<std::byte const> bytes) {
    std::string back;
    try {
      back = read_all(key, bytes.size() + 1);
    } catch (io_error const& e) {
      if (e.kind() == std::errc::no_such_file_or_directory || e.kind() == io_errc::too_large) return false;
      throw;
    }
    return back.size() == bytes.size() && std::memcmp(back.data(), bytes.data(), bytes.size()) == 0;
  }

  [[nodiscard]] bool create_exclusive(std::string_view key, std::span<std::byte const> bytes) override {
    if (client_->settings().conditional_create) {
      s3_request request("PUT (If-None-Match)", "PUT", std::string(key));
      request.body = bytes;
      request.headers = {"Content-MD5: " + content_md5(bytes), "If-None-Match: *"};
      request.expected_failures = {409, 412};
      request.done_already = [&] { return holds(key, bytes); };
      auto response = client_->perform(request);
      if (response.status < 300) return true;
      // Refused: by another writer's object, or by this one's, from an attempt whose answer was
      // lost (libcurl sends again unseen on a reused connection). It is this one's when it holds
      // these bytes (a lease records a random token).
      return holds(key, bytes);
    }
    // A store that ignores If-None-Match: look, write, and read back. Of two writers, the one
    // whose bytes are not read back loses; two that both look before either writes can both
    // read their own bytes back when the reads come before the later write. The lock's owner
    // checks again before each commit (docs/object-storage.md).
    if (size(key)) return false;
    write(key, bytes);
    return holds(key, bytes);
  }

  [[nodiscard]] std::unique_ptr<object_writer> open_writer(std::string_view key, std::uint64_t held) override {
    return std::make_unique<s3_writer>(client_, std::string(key), held);
  }

  [[nodiscard]] std::vector<listed_entry> list(std::string_view prefix) override {
    std::vector<listed_entry> out;
    auto dir = directory_prefix(prefix);
    each_key(dir, true, [&](std::string const& key, std::uint64_t size, bool common) {
      auto name = key.substr(dir.size());
      if (common && name.ends_with('/')) name.pop_back();
      if (!name.empty()) out.push_back({name, size, common});
    });
    std::sort(out.begin(), out.end(), [](auto const& a, auto const& b) { return a.name < b.name; });
    return out;
  }

  [[nodiscard]] std::optional<std::vector<listed_entry>> list_all(std::string_view prefix) override {
    std::vector<listed_entry> out;
    auto dir = directory_prefix(prefix);
    each_key(dir, false, [&](std::string const& key, std::uint64_t size, bool) {
      if (key.size() > dir.size()) out.push_back({key.substr(dir.size()), size, false});
    });
    std::sort(out.begin(), out.end(), [](auto const& a, auto const& b) { return a.name < b.name; });
    return out;
  }

  void remove(std::string_view key) override {
    s3_request request("DELETE", "DELETE", std::string(key));
    request.accepted = {200, 204, 404};
    client_->perform(request);
  }

  void remove_tree(std::string_view prefix) override {
    std::vector<std::string> keys;
    each_key(directory_prefix(prefix), false,
             [&](std::string const& key, std::uint64_t, bool) { keys.push_back(key); });
    for (auto const& key : keys) remove(key);
    if (!prefix.empty() && !prefix.ends_with('/')) remove(prefix);
  }

  [[nodiscard]] s3_client& client() noexcept { return *client_; }

  /// Aborts the multipart uploads under `prefix` never completed nor aborted (a process killed
  /// mid-save); a store that does not list uploads (s3rver) ends nothing.
  std::vector<std::string> end_unfinished(std::string_view prefix) override {
    std::vector<std::string> out;
    s3_request request("ListMultipartUploads", "GET", "");
    request.query = {{"prefix", directory_prefix(prefix)}, {"uploads", ""}};
    request.expected_failures = {400, 404, 405, 501};
    auto response = client_->perform(request);
    if (response.status >= 300) return out; // the store does not list uploads
    for (auto block : xml_blocks(response.text, "Upload")) {
      auto key = xml_first(block, "Key"), id = xml_first(block, "UploadId");
      if (key.empty() || id.empty()) continue;
      s3_request abort("AbortMultipartUpload", "DELETE", key);
      abort.query = {{"uploadId", id}};
      abort.accepted = {200, 204, 404};
      client_->perform(abort);
      out.push_back(describe(key));
    }
    return out;
  }

private:
  static std::string directory_prefix(std::string_view prefix) {
    std::string dir(prefix);
    if (!dir.empty() && !dir.ends_with('/')) dir += '/';
    return dir;
  }

  /// Calls `each(key, size, is_common_prefix)` for every key under `prefix` (one level when
  /// `delimited`), through every page of ListObjectsV2; a page that fails throws.
  template <class Each> void each_key(std::string const& prefix, bool delimited, Each&& each) {
    std::string token;
    for (;;) {
      s3_request request("LIST", "GET", "");
      request.subject = prefix;
      if (!token.empty()) request.query.emplace_back("continuation-token", token);
      if (delimited) request.query.emplace_back("delimiter", "/");
      request.query.emplace_back("list-type", "2");
      request.query.emplace_back("prefix", prefix);
      auto response = client_->perform(request);
      if (response.text.find("<ListBucketResult") == std::string::npos)
        throw s3_error(describe(prefix), "LIST", response.status, "", "LIST answered no ListBucketResult");
      for (auto block : xml_blocks(response.text, "Contents")) {
        auto key = xml_first(block, "Key");
        std::uint64_t size = 0;
        auto text = xml_first(block, "Size");
        std::from_chars(text.data(), text.data() + text.size(), size);
        if (key.starts_with(prefix)) each(key, size, false);
      }
      for (auto block : xml_blocks(response.text, "CommonPrefixes"))
        for (auto const& common : xml_values(block, "Prefix"))
          if (common.starts_with(prefix)) each(common, 0, true);
      if (xml_first(response.text, "IsTruncated") != "true") return;
      token = xml_first(response.text, "NextContinuationToken");
      if (token.empty())
        throw s3_error(describe(prefix), "LIST", response.status, "", "LIST truncated without a continuation token");
    }
  }

  void read_range(std::string_view key, std::uint64_t offset, std::span<std::byte> out) {
    s3_request request("GET (range)", "GET", std::string(key));
    request.range = std::pair{offset, static_cast<std::uint64_t>(out.size())};
    request.into = out;
    request.accepted = {206};
    if (offset == 0) request.accepted.push_back(200); // a whole object asked for whole
    request.expected_failures = {404, 416};
    auto response = client_->perform(request);
    if (response.status == 404)
      throw io_error(describe(key), std::make_error_code(std::errc::no_such_file_or_directory), "no such object");
    if (response.status == 416) throw io_error(describe(key), "read past the end of the object");
  }

  std::shared_ptr<s3_client> client_;
};

/// An INI file as the AWS tools write them: section → key → value.
inline std::map<std::string, std::map<std::string, std::string>> read_ini(std::string const& path) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::ifstream in(path);
  std::string line, section;
  auto trim = [](std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    return std::string(text);
  };
  while (std::getline(in, line)) {
    auto text = trim(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      section = trim(std::string_view(text).substr(1, text.size() - 2));
      continue;
    }
    auto equals = text.find('=');
    if (equals == std::string::npos) continue;
    out[section][trim(std::string_view(text).substr(0, equals))] = trim(std::string_view(text).substr(equals + 1));
  }
  return out;
}

} // namespace cairn::io::detail

namespace cairn::io {

CAIRN_DECL s3_address s3_address::parse(std::string_view url) {
  auto fail = [&](std::string const& why) { return io_error(std::string(url), io_errc::invalid_argument, why); };
  if (!url.starts_with("s3://")) throw fail("not an s3:// address");
  auto rest = url.substr(5);
  auto slash = rest.find('/');
  s3_address out{std::string(rest.substr(0, slash)),
                 slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash + 1))};
  if (out.bucket.size() < 3 || out.bucket.size() > 63)
    throw fail("the bucket name '" + out.bucket + "' must have 3 to 63 characters");
  for (char c : out.bucket)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
          c == '.'))
      throw fail("the bucket name '" + out.bucket + "' may hold lower-case letters, digits, '-' and '.' only");
  while (out.key.ends_with('/')) out.key.pop_back();
  std::string_view key = out.key;
  for (std::size_t at = 0; !key.empty() && at <= key.size();) {
    auto end = key.find('/', at);
    auto segment = key.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (segment.empty() || segment == "." || segment == "..")
      throw fail("an empty, '.' or '..' part in the key: S3 keeps them as they are, which is never what was meant");
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return out;
}

CAIRN_DECL s3_settings
s3_settings::from_environment(std::function<std::optional<std::string>(char const*)> const& lookup_or_empty) {
  auto lookup = lookup_or_empty ? lookup_or_empty : [](char const* name) -> std::optional<std::string> {
    if (auto const* value = std::getenv(name); value && *value) return std::string(value);
    return std::nullopt;
  };
  s3_settings out;
  auto home = lookup("HOME").value_or("");
  auto profile = lookup("AWS_PROFILE").value_or(lookup("AWS_DEFAULT_PROFILE").value_or("default"));
  auto credentials_file = lookup("AWS_SHARED_CREDENTIALS_FILE").value_or(home + "/.aws/credentials");
  auto config_file = lookup("AWS_CONFIG_FILE").value_or(home + "/.aws/config");
  auto config = detail::read_ini(config_file);
  auto const& section = config[profile == "default" ? std::string("default") : "profile " + profile];
  auto from_config = [&](char const* key) -> std::optional<std::string> {
    if (auto it = section.find(key); it != section.end() && !it->second.empty()) return it->second;
    return std::nullopt;
  };

  if (auto id = lookup("AWS_ACCESS_KEY_ID")) {
    out.access_key_id = *id;
    auto secret = lookup("AWS_SECRET_ACCESS_KEY");
    if (!secret)
      throw io_error("AWS_SECRET_ACCESS_KEY", io_errc::invalid_argument,
                     "AWS_ACCESS_KEY_ID is set and AWS_SECRET_ACCESS_KEY is not");
    out.secret_access_key = *secret;
    out.session_token = lookup("AWS_SESSION_TOKEN").value_or("");
    out.credentials_source = "AWS_ACCESS_KEY_ID";
  } else {
    auto credentials = detail::read_ini(credentials_file);
    auto it = credentials.find(profile);
    if (it != credentials.end() && it->second.count("aws_access_key_id")) {
      out.access_key_id = it->second["aws_access_key_id"];
      out.secret_access_key = it->second["aws_secret_access_key"];
      out.session_token = it->second["aws_session_token"];
      out.credentials_source = "profile '" + profile + "' of " + credentials_file;
      if (out.secret_access_key.empty())
        throw io_error(credentials_file, io_errc::invalid_argument,
                       "profile '" + profile + "' has aws_access_key_id and no aws_secret_access_key");
    } else if (auto id_in_config = from_config("aws_access_key_id")) {
      out.access_key_id = *id_in_config;
      out.secret_access_key = from_config("aws_secret_access_key").value_or("");
      out.session_token = from_config("aws_session_token").value_or("");
      out.credentials_source = "profile '" + profile + "' of " + config_file;
    } else {
      throw io_error("s3://", io_errc::invalid_argument,
                     "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile '" + profile +
                         "' (AWS_PROFILE) an aws_access_key_id in " + credentials_file);
    }
  }

  out.region =
      lookup("AWS_REGION").value_or(lookup("AWS_DEFAULT_REGION").value_or(from_config("region").value_or("us-east-1")));
  out.endpoint = lookup("AWS_ENDPOINT_URL_S3")
                     .value_or(lookup("AWS_ENDPOINT_URL").value_or(from_config("endpoint_url").value_or("")));
  if (!out.endpoint.empty() && !out.endpoint.starts_with("http://") && !out.endpoint.starts_with("https://"))
    throw io_error(lookup("AWS_ENDPOINT_URL_S3") ? "AWS_ENDPOINT_URL_S3" : "AWS_ENDPOINT_URL",
                   io_errc::invalid_argument, "'" + out.endpoint + "' is not an http:// or https:// address");

  auto number = [&](char const* name, double least, double most, double fallback) {
    auto text = lookup(name);
    if (!text) return fallback;
    double value = 0;
    auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (ec != std::errc() || p != text->data() + text->size() || !(value >= least && value <= most))
      throw io_error(name, io_errc::invalid_argument,
                     "'" + *text + "' is not a number from " + std::to_string(static_cast<long long>(least)) + " to " +
                         std::to_string(static_cast<long long>(most)));
    return value;
  };
  out.part_size = static_cast<std::uint64_t>(number("CAIRN_S3_PART_SIZE", static_cast<double>(detail::s3_min_part),
                                                    static_cast<double>(detail::s3_max_part), 0));
  out.parts_in_flight = static_cast<int>(number("CAIRN_S3_PARTS_IN_FLIGHT", 1, 256, 8));
  out.retry_seconds = number("CAIRN_S3_RETRY_SECONDS", 0, 86400, 120);
  out.request_timeout = number("CAIRN_S3_REQUEST_TIMEOUT", 1, 86400, 60);
  out.conditional_create = number("CAIRN_S3_CONDITIONAL_CREATE", 0, 1, out.endpoint.empty() ? 1 : 0) != 0;
  return out;
}

CAIRN_DECL std::shared_ptr<storage_backend> make_s3_backend(std::string bucket, s3_settings settings) {
  return std::make_shared<detail::s3_storage>(std::move(bucket), std::move(settings));
}

CAIRN_DECL std::shared_ptr<storage_backend> open_s3_location(std::string_view url, std::string& key) {
  auto address = s3_address::parse(url);
  key = std::move(address.key);
  return s3_backend_for(address.bucket);
}

CAIRN_DECL std::shared_ptr<storage_backend> s3_backend_for(std::string const& bucket) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<storage_backend>> made;
  std::lock_guard lock(mutex);
  auto& backend = made[bucket];
  if (!backend) backend = make_s3_backend(bucket, s3_settings::from_environment());
  return backend;
}

CAIRN_DECL s3_statistics statistics_of(storage_backend const& backend) {
  if (auto const* s3 = dynamic_cast<detail::s3_storage const*>(&backend))
    return const_cast<detail::s3_storage*>(s3)->client().statistics();
  return {};
}

CAIRN_DECL storage_report check_object_store(std::string_view url) {
  auto address = s3_address::parse(url);
  auto settings = s3_settings::from_environment();
  storage_report report;
  report.directory = std::string(url);
  report.filesystem = "S3 at " + (settings.endpoint.empty() ? "AWS" : settings.endpoint) + " (region " +
                      settings.region + ", credentials from " + settings.credentials_source + ")";
  settings.part_size = detail::s3_min_part;
  settings.retry_seconds = std::min(settings.retry_seconds, 30.0);
  auto strict = settings;
  strict.conditional_create = true;
  detail::s3_storage s3(address.bucket, settings), conditional(address.bucket, strict);
  std::random_device random;
  auto scratch = (address.key.empty() ? std::string() : address.key + "/") + ".cairn-check-storage-" +
                 std::to_string(::getpid()) + "-" + std::to_string(random());
  auto token = "cairn " + std::to_string(random()) + " " + std::to_string(random());
  auto check = [&](std::string name, std::string consequence, auto&& body) {
    storage_check c{std::move(name), false, "", std::move(consequence)};
    try {
      c.detail = body();
      c.holds = c.detail.empty() || c.detail.starts_with("yes");
      if (c.detail.empty()) c.detail = "yes";
    } catch (std::exception const& e) {
      c.detail = e.what();
    }
    report.checks.push_back(std::move(c));
  };
  // The bucket must answer at all: anything else is checked only once it does.
  (void)s3.list(scratch);
  auto a = scratch + "/a";
  check("write and read back", "nothing can be saved here", [&]() -> std::string {
    s3.write(a, std::as_bytes(std::span(token)));
    auto back = s3.read_all(a, 1 << 20);
    return back == token ? "" : "read back '" + back + "'";
  });
  check("overwrite and read back", "a marker or the lock rewritten may be read as it was", [&]() -> std::string {
    auto second = token + " again";
    s3.write(a, std::as_bytes(std::span(second)));
    auto back = s3.read_all(a, 1 << 20);
    return back == second ? "" : "read back the object as it was before";
  });
  check("ranged read", "loads would read whole objects", [&]() -> std::string {
    std::vector<std::byte> piece(5);
    s3.read(a, 0, piece);
    return std::memcmp(piece.data(), "cairn", 5) == 0 ? "" : "a range read other bytes";
  });
  check("list after write", "a resume could miss the newest save", [&]() -> std::string {
    for (auto const& entry : s3.list(scratch))
      if (entry.name == "a") return "";
    return "the object written is not listed";
  });
  check("conditional create",
        "two runs started at the same instant on one directory could both take its lock: "
        "cairn looks, writes and reads back instead (CAIRN_S3_CONDITIONAL_CREATE=0)",
        [&]() -> std::string {
          auto lock = scratch + "/lock";
          if (!conditional.create_exclusive(lock, std::as_bytes(std::span(token)))) return "the first create lost";
          auto other = token + " other";
          if (conditional.create_exclusive(lock, std::as_bytes(std::span(other))))
            return "a second PUT with If-None-Match: * replaced the object";
          return "yes: a second PUT with If-None-Match: * is refused (CAIRN_S3_CONDITIONAL_CREATE=1 uses it)";
        });
  check("multipart upload", "a rank file larger than 5 GiB cannot be saved", [&]() -> std::string {
    std::vector<std::byte> data(detail::s3_min_part + 3, std::byte{7});
    data.back() = std::byte{9};
    auto writer = s3.open_writer(scratch + "/parts", 0);
    writer->write(data);
    writer->commit();
    auto stored = s3.size(scratch + "/parts");
    if (stored != data.size())
      return "the object completed has " + std::to_string(stored.value_or(0)) + " bytes, not " +
             std::to_string(data.size());
    std::vector<std::byte> tail(3);
    s3.read(scratch + "/parts", data.size() - 3, tail);
    return tail[2] == std::byte{9} ? "" : "the object read back differs";
  });
  check("abort of an upload",
        "an interrupted save's parts stay stored (and billed) until a lifecycle rule of the "
        "bucket removes them",
        [&]() -> std::string {
          detail::s3_request start("CreateMultipartUpload", "POST", scratch + "/aborted");
          start.query = {{"uploads", ""}};
          auto id = detail::xml_first(s3.client().perform(start).text, "UploadId");
          detail::s3_request abort("AbortMultipartUpload", "DELETE", scratch + "/aborted");
          abort.query = {{"uploadId", id}};
          abort.accepted = {200, 204};
          abort.expected_failures = {400, 405, 501};
          auto status = s3.client().perform(abort).status;
          return status < 300 ? "" : "AbortMultipartUpload answered HTTP " + std::to_string(status);
        });
  check("delete", "retention could not remove old saves", [&]() -> std::string {
    s3.remove(a);
    if (s3.size(a)) return "the object is still there";
    for (auto const& entry : s3.list(scratch))
      if (entry.name == "a") return "the deleted object is still listed";
    return "";
  });
  try {
    s3.remove_tree(scratch);
  } catch (std::exception const&) {
    // What is left is under a name no save uses.
  }
  return report;
}

} // namespace cairn::io
