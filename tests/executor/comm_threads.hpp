#pragma once
// The ranks of a local Communicator group as threads of a doctest test, and their errors.

#include <doctest/doctest.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "artune/communicator.hpp"

namespace artune_test {

using artune::Communicator;
using artune::Error;
using artune::ErrorCode;

// Runs fn(rank) on one thread per communicator; returns each rank's exception (null when none).
inline std::vector<std::exception_ptr> on_threads(std::vector<Communicator>& comms,
                                                  const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(comms.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(static_cast<int>(r));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline ErrorCode code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return err.code();
  }
  return ErrorCode::kWrongResult;
}

inline std::string message_of(const std::exception_ptr& e) {
  if (!e) return "no error";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& err) {
    return err.what();
  }
  return "";
}

inline void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r);
    if (errors[r]) FAIL(message_of(errors[r]));
  }
}

}  // namespace artune_test
