// One rank of the rendezvous test, started by `cairn launch -n N`: what rank 0 publishes through
// the run's store (as NCCL's unique id is) reaches every rank, and a rank waiting for something
// never published fails in time, naming the key. Exit status 0 when this rank saw what it should.
//
//     store_worker share     every rank gets rank 0's bytes
//     store_worker timeout   rank 0 publishes nothing; the others fail within 500 ms
//     store_worker absent    rank 0 serves no store; the others fail within 500 ms, naming
//                            MASTER_ADDR:MASTER_PORT and what they found there (refused)
#include <cairn/comm/store.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "share";
  try {
    auto env = cairn::comm::read_environment();
    if (mode == "absent") {
      if (env.rank == 0) return 0;
      auto started = std::chrono::steady_clock::now();
      try {
        cairn::comm::make_store(env, std::chrono::milliseconds(500));
      } catch (cairn::error const& e) {
        auto waited = std::chrono::steady_clock::now() - started;
        std::string message = e.what();
        auto address = env.master_addr + ":" + std::to_string(env.master_port);
        bool named = message.find(address) != std::string::npos && message.find("500 ms") != std::string::npos &&
                     message.find("refused") != std::string::npos;
        std::printf("rank %d: %s\n", env.rank, message.c_str());
        return named && waited < std::chrono::seconds(2) ? 0 : 1;
      }
      std::fprintf(stderr, "rank %d: a store without a server\n", env.rank);
      return 1;
    }
    auto store = cairn::comm::make_store(env, std::chrono::seconds(60));
    if (mode == "share") {
      // Bytes only rank 0 can know: its process id and the time.
      auto made = "id-" + std::to_string(::getpid()) + "-" +
                  std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
      auto shared = cairn::comm::share_from_rank0(*store, env, "test/unique_id",
                                                  [&] { return std::vector<std::uint8_t>(made.begin(), made.end()); });
      std::string got(shared.begin(), shared.end());
      // Every rank reports what it got; rank 0 compares them with what it made.
      store->set("test/got/" + std::to_string(env.rank), shared);
      if (env.rank == 0) {
        for (int r = 0; r < env.world_size; ++r) {
          auto key = "test/got/" + std::to_string(r);
          store->wait({key}, std::chrono::seconds(60));
          auto theirs = store->get(key);
          if (std::string(theirs.begin(), theirs.end()) != made) {
            std::fprintf(stderr, "rank %d got '%s', rank 0 made '%s'\n", r,
                         std::string(theirs.begin(), theirs.end()).c_str(), made.c_str());
            return 1;
          }
        }
        std::printf("all %d ranks got %s\n", env.world_size, made.c_str());
      }
      store->add("test/done", 1); // rank 0, the server, stays until every rank is done with it
      while (env.rank == 0 && store->add("test/done", 0) < env.world_size)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return 0;
    }
    if (env.rank == 0) {
      std::this_thread::sleep_for(std::chrono::seconds(3)); // serves the store, publishes nothing
      return 0;
    }
    auto started = std::chrono::steady_clock::now();
    try {
      cairn::comm::share_from_rank0(
          *store, env, "test/never", [] { return std::vector<std::uint8_t>{}; }, std::chrono::milliseconds(500));
    } catch (cairn::error const& e) {
      auto waited = std::chrono::steady_clock::now() - started;
      std::string message = e.what();
      bool named = message.find("'test/never'") != std::string::npos && message.find("500 ms") != std::string::npos;
      std::printf("rank %d: %s\n", env.rank, message.c_str());
      return named && waited < std::chrono::seconds(2) ? 0 : 1;
    }
    std::fprintf(stderr, "rank %d: waited for nothing and got something\n", env.rank);
    return 1;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
