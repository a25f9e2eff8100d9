#pragma once
// cairn: requires s3

// The S3 backend of <cairn/io/backend.hpp>: objects in AWS S3 or an S3-compatible store (MinIO,
// Ceph, R2, GCS's XML API), reached through libcurl, which signs each request with AWS
// Signature V4 itself. Needs CAIRN_WITH_S3 (libcurl and OpenSSL's libcrypto, for Content-MD5).
//
// Settings come from the standard variables and files, as the AWS tools read them:
//   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; else the profile AWS_PROFILE
//     (default "default") of AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials);
//   AWS_REGION, AWS_DEFAULT_REGION, else the profile's `region` in AWS_CONFIG_FILE
//     (default ~/.aws/config), else us-east-1;
//   AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else the profile's `endpoint_url`: a custom endpoint,
//     addressed path-style (`http://host:port/bucket/key`); without one, AWS's own endpoint of
//     the region, addressed virtual-host style.
// and cairn's own tuning: CAIRN_S3_PART_SIZE (bytes, 5 MiB to 5 GiB; default: 8 MiB, growing to
// 64 MiB for objects of more than 8,000 MiB), CAIRN_S3_PARTS_IN_FLIGHT (default 8),
// CAIRN_S3_RETRY_SECONDS (total time one operation may spend retrying, default 120),
// CAIRN_S3_REQUEST_TIMEOUT (seconds a request may go without progress, default 60),
// CAIRN_S3_CONDITIONAL_CREATE (1 or 0: whether the store honours `If-None-Match: *`; default 1
// for AWS, 0 for a custom endpoint). A secret is never printed, in errors or logs.

#include <cairn/detail/decl.hpp>
#include <cairn/io/backend.hpp>
#include <cairn/io/error.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace cairn::io {

/// `s3://bucket/key`, split.
struct s3_address {
  std::string bucket;
  std::string key; ///< no leading '/'; may be empty (the bucket's root)

  /// Throws an io_error naming `url` when it is not `s3://bucket[/key]` with a valid bucket name.
  [[nodiscard]] CAIRN_DECL static s3_address parse(std::string_view url);
};

/// How to reach a store and how hard to try.
struct s3_settings {
  std::string endpoint; ///< `http[s]://host[:port]`; empty: AWS's own for `region`
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;  ///< never printed
  std::string session_token;      ///< never printed
  std::string credentials_source; ///< where the credentials came from, for messages

  std::uint64_t part_size = 0; ///< 0: chosen by the object's size (8 MiB growing to 64 MiB)
  int parts_in_flight = 8;
  double retry_seconds = 120;
  double request_timeout = 60;
  bool conditional_create = false;

  /// Reads the variables and files named above through `lookup` (the process's environment by
  /// default). Throws an io_error naming the variable or file that is wrong, or saying where
  /// credentials were looked for when there are none.
  [[nodiscard]] CAIRN_DECL static s3_settings
  from_environment(std::function<std::optional<std::string>(char const*)> const& lookup = {});
};

/// A request the store refused or that never got an answer: the message names the object, the
/// operation, the HTTP status and the store's error code (or the transfer's failure), and the
/// attempts made.
class s3_error : public io_error {
public:
  s3_error(std::string const& object, std::string operation, long status, std::string code, std::string const& message)
      : io_error(object, io_errc::storage, message), operation_(std::move(operation)), status_(status),
        code_(std::move(code)) {}

  [[nodiscard]] std::string const& operation() const noexcept { return operation_; }
  /// The HTTP status, or 0 when no response came (a connection refused, reset or timed out).
  [[nodiscard]] long status() const noexcept { return status_; }
  /// The store's error code (`NoSuchKey`, `SlowDown`, …), or curl's text for a transfer failure.
  [[nodiscard]] std::string const& code() const noexcept { return code_; }

private:
  std::string operation_;
  long status_;
  std::string code_;
};

/// Counters of what a backend sent, for benchmarks and tests.
struct s3_statistics {
  std::uint64_t requests = 0;
  std::uint64_t retries = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
};

/// A backend for one bucket with explicit settings.
[[nodiscard]] CAIRN_DECL std::shared_ptr<storage_backend> make_s3_backend(std::string bucket, s3_settings settings);

/// The backend of `bucket` with the settings of the environment, made once per bucket and
/// process (what `open_location("s3://…")` gives).
[[nodiscard]] CAIRN_DECL std::shared_ptr<storage_backend> s3_backend_for(std::string const& bucket);

/// The backend of `url` (`s3://bucket/key`), with `key` set to its key there.
[[nodiscard]] CAIRN_DECL std::shared_ptr<storage_backend> open_s3_location(std::string_view url, std::string& key);

/// What `backend` (an S3 backend) has sent so far; zeros for another backend.
[[nodiscard]] CAIRN_DECL s3_statistics statistics_of(storage_backend const& backend);

struct storage_report;

/// What the store at `url` (`s3://bucket/prefix`) guarantees, checked under a scratch prefix
/// removed after: read after write and after overwrite, ranged reads, list after write, a
/// conditional create (`If-None-Match: *`), a multipart upload, the abort of one, delete.
/// What `check_storage` does for an s3:// path.
[[nodiscard]] CAIRN_DECL storage_report check_object_store(std::string_view url);

} // namespace cairn::io

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/io/impl/s3.ipp>
#endif
