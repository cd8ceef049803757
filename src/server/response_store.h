// The responses /v1/responses keeps for a later previous_response_id (and GET /v1/responses/ID):
// each response's whole conversation as chat messages and the Response object itself, in memory.
// Bounded by count and by bytes: past either bound the oldest go first, and a previous_response_id
// that is gone gets a 404 that says so. Nothing survives a restart.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace ts::server {

struct StoredResponse {
  nlohmann::json conversation;  // chat messages: every turn up to and including this answer
  nlohmann::json response;      // the Response object as it was sent
  size_t bytes = 0;
};

class ResponseStore {
 public:
  ResponseStore(size_t max_entries, size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  void put(const std::string& id, nlohmann::json conversation, nlohmann::json response);
  std::optional<StoredResponse> get(const std::string& id) const;
  bool erase(const std::string& id);
  size_t size() const;

 private:
  void evict_locked();

  size_t max_entries_;
  size_t max_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, StoredResponse> entries_;
  std::deque<std::string> order_;  // oldest first; may hold ids already erased
  size_t bytes_ = 0;
};

}  // namespace ts::server
