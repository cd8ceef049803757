// The encoder's scheduler without HTTP, on the bert_embedding fixture: every job gets the vector
// the encoder gives its text alone, bit for bit, however the jobs were batched into passes; what
// it cannot take (a generation, an empty or too long text, an id outside the vocabulary) is
// refused at submission by name; stop() fails what still waits.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "runtime/encoder.h"
#include "server/encoder_scheduler.h"
#include "test_paths.h"

namespace ts::server {
namespace {

using namespace std::chrono_literals;

std::string fixture(const std::string& file) {
  return test::fixtures_dir() + "/models/bert_embedding/" + file;
}

std::vector<std::vector<int32_t>> reference_ids() {
  std::ifstream f(fixture("ref.json"));
  return nlohmann::json::parse(f)["ids"].get<std::vector<std::vector<int32_t>>>();
}

GenRequest embedding(std::vector<int32_t> ids) {
  GenRequest g;
  g.prompt = std::move(ids);
  g.embed = true;
  return g;
}

JobUpdate wait(Job& job) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    JobUpdate u = job.take(100ms);
    if (u.done) return u;
  }
  ADD_FAILURE() << "the job did not finish";
  return {};
}

std::string refusal(EncoderScheduler& s, GenRequest g) {
  try {
    s.submit(std::move(g));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

class EncoderSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { encoder_ = Encoder::open(fixture("model-f32.gguf"), "cpu", 2); }
  std::vector<float> alone(const std::vector<int32_t>& ids) {
    Pooler pooler(read_embedding_spec(encoder_->source()), encoder_->cfg().n_embd);
    return encoder_->embed(ids, pooler);
  }
  std::unique_ptr<Encoder> encoder_;
};

TEST_F(EncoderSchedulerTest, JobsGetTheirTextsOwnVectors) {
  SchedulerOptions o;
  o.parallel = 3;
  o.batch_rows = 40;  // raised to the 64 positions
  o.queue_capacity = 64;
  EncoderScheduler s(*encoder_, o);
  EXPECT_EQ(s.options().ctx, 64);
  EXPECT_EQ(s.options().batch_rows, 64);
  EXPECT_EQ(s.embedding_size(), 32);
  EXPECT_EQ(s.embedding().pooling, Pooling::Mean);
  const auto ids = reference_ids();
  std::vector<std::shared_ptr<Job>> jobs;
  int64_t rows = 0;
  for (int round = 0; round < 4; ++round)
    for (const auto& t : ids) {
      jobs.push_back(s.submit(embedding(t)));
      ASSERT_NE(jobs.back(), nullptr);
      rows += static_cast<int64_t>(t.size());
    }
  std::vector<JobUpdate> done;
  for (const auto& j : jobs) done.push_back(wait(*j));
  // The scheduler's thread is idle now: the encoder is this thread's to run alone.
  const SchedulerStats st = s.stats();
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(done[i].error, "");
    const auto& t = ids[i % ids.size()];
    EXPECT_EQ(done[i].embedding, alone(t)) << "job " << i;
    EXPECT_EQ(done[i].usage.prompt_tokens, static_cast<int64_t>(t.size()));
  }
  EXPECT_EQ(st.prefill_rows, static_cast<uint64_t>(rows));
  EXPECT_LE(st.steps, jobs.size());
  EXPECT_EQ(st.slots_total, 3);
}

TEST_F(EncoderSchedulerTest, RefusesWhatItCannotTake) {
  EncoderScheduler s(*encoder_, SchedulerOptions{});
  EXPECT_EQ(s.cannot_generate(),
            "model is an embedding encoder; it cannot generate (bert: use /v1/embeddings or "
            "/api/embed)");
  GenRequest generate;
  generate.prompt = {2, 18, 3};
  EXPECT_EQ(refusal(s, generate), s.cannot_generate());
  EXPECT_EQ(refusal(s, embedding({})), "nothing to embed: the text has no tokens");
  EXPECT_EQ(refusal(s, embedding(std::vector<int32_t>(65, 5))),
            "65 tokens exceed the encoder's 64 positions");
  EXPECT_EQ(refusal(s, embedding({2, 300, 3})), "token id 300 is outside the vocabulary of 300");
  s.stop();
  EXPECT_EQ(refusal(s, embedding({2, 18, 3})), "the server is shutting down");
}

}  // namespace
}  // namespace ts::server
