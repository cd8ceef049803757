#include "server/response_store.h"

#include "server/api_response.h"

namespace ts::server {

void ResponseStore::put(const std::string& id, nlohmann::json conversation,
                        nlohmann::json response) {
  StoredResponse s;
  // What the entry costs, counted as its serialised size (the parsed form is a few times more,
  // but in proportion).
  s.bytes = dump(conversation).size() + dump(response).size() + id.size();
  s.conversation = std::move(conversation);
  s.response = std::move(response);
  std::lock_guard lock(mu_);
  if (s.bytes > max_bytes_) return;  // larger than the whole store: not kept
  if (auto it = entries_.find(id); it != entries_.end()) {
    bytes_ -= it->second.bytes;
    entries_.erase(it);
  }
  bytes_ += s.bytes;
  entries_.emplace(id, std::move(s));
  order_.push_back(id);
  evict_locked();
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void ResponseStore::evict_locked() {
  while ((entries_.size() > max_entries_ || bytes_ > max_bytes_) && !order_.empty()) {
    const auto it = entries_.find(order_.front());
    order_.pop_front();
    if (it == entries_.end()) continue;
    bytes_ -= it->second.bytes;
    entries_.erase(it);
  }
  // Ids erased or replaced leave stale names behind; drop them once they outnumber the entries.
  if (order_.size() > 2 * max_entries_ + 16) {
    std::deque<std::string> live;
    for (const std::string& id : order_)
      if (entries_.count(id) != 0) live.push_back(id);
    order_.swap(live);
  }
}

}  // namespace ts::server
