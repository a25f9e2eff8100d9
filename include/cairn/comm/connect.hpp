#pragma once
// cairn: requires libtorch

// Choosing and making the communicator of a run, from what its config asks for: no trainer
// writes this itself.

#include <cairn/comm/any.hpp>
#include <cairn/comm/environment.hpp>
#include <cairn/detail/decl.hpp>

#include <chrono>

namespace cairn::comm {

/// The communicator of this process for a run of tensors on CUDA (`cuda`) or CPU that asks for
/// `requested`: the launcher's ranks (the torchrun variables) or one process
/// alone; NCCL on the rank's GPU where `requested` resolves to it (`resolve_backend`), else Gloo.
/// Collectives, and the start of the job, wait at most `timeout` for every rank. A config_error
/// on the key `comm` says why NCCL cannot be had (not built in, no CUDA tensors) before any rank
/// waits for another.
///
///     auto comm = cairn::comm::connect(cfg.comm, cfg.device == cairn::device_type::cuda, cfg.run.timeout());
CAIRN_DECL any_communicator connect(backend requested, bool cuda,
                                    std::chrono::milliseconds timeout = std::chrono::minutes(5));

} // namespace cairn::comm

#ifndef CAIRN_SEPARATE_COMPILATION
#include <cairn/comm/impl/connect.ipp>
#endif
