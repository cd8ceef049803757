#include "parallel_cases.h"

namespace ts::test {

std::vector<float> collectives_round(Communicator& c, Backend* device) {
  const int r = c.rank(), N = c.size();
  std::vector<float> sum{float(r + 1), float(10 * r), 0.5f};
  std::vector<float> send;
  for (int i = 0; i <= r; ++i) send.insert(send.end(), {float(r), float(i)});
  RowExchange x;
  int64_t at = 0;
  for (int p = 0; p < N; ++p) {
    x.send_row0.push_back(0);
    x.send_rows.push_back(r + 1);
    x.recv_row0.push_back(at);
    x.recv_rows.push_back(p + 1);
    at += p + 1;
  }
  std::vector<float> recv(static_cast<size_t>(at * 2));
  if (device == nullptr) {
    c.all_reduce_sum(sum.data(), 3);
    c.exchange_rows(send.data(), recv.data(), 2, x);
    c.barrier();
  } else {
    const auto put = [&](const std::vector<float>& v) {
      auto* p = static_cast<float*>(device->alloc(v.size() * sizeof(float)));
      device->to_device(p, v.data(), v.size() * sizeof(float));
      return p;
    };
    float *s = put(sum), *snd = put(send), *rcv = put(recv);
    c.all_reduce_sum(s, 3);
    c.exchange_rows(snd, rcv, 2, x);
    c.barrier();
    device->to_host(sum.data(), s, sum.size() * sizeof(float));
    device->to_host(recv.data(), rcv, recv.size() * sizeof(float));
    for (float* p : {s, snd, rcv}) device->free(p);
  }
  sum.insert(sum.end(), recv.begin(), recv.end());
  return sum;
}

}  // namespace ts::test
