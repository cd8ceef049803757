#include "runtime/generator.h"

#include <chrono>
#include <memory>
#include <optional>

#include "core/error.h"
#include "runtime/session.h"
#include "text/detokenizer.h"
#include "text/json_constraint.h"
#include "text/stop_strings.h"
#include "text/tokenizer.h"

namespace ts {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::ToolCalls:
      return "tool_calls";
  }
  return "?";
}

GenerateResult generate(Session& session, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                        const GenerateOptions& o,
                        const std::function<void(const std::string&)>& on_text) {
  using Clock = std::chrono::steady_clock;
  if (prompt.empty()) fail(ErrorKind::Input, "the prompt is empty");
  const int64_t V = session.engine_vocab();
  GenerateResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  std::vector<float> logits(static_cast<size_t>(V));
  Sampler sampler(o.sampling);
  for (int32_t t : prompt) sampler.accept(t);

  auto t0 = Clock::now();
  session.feed(prompt.data(), static_cast<int64_t>(prompt.size()), logits.data(), false);
  r.prompt_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  TextStream stream(tok);
  StopStrings stops(o.stop);
  auto emit = [&](const std::string& s) {
    if (s.empty()) return;
    r.text += s;
    on_text(s);
  };
  t0 = Clock::now();
  const int64_t limit = o.max_tokens < 0 ? session.ctx() - session.n_past() : o.max_tokens;
  std::optional<JsonConstraint> json;
  if (o.json)
    json.emplace(
        o.json_vocab != nullptr ? o.json_vocab : std::make_shared<const JsonVocabulary>(tok),
        o.json);
  for (int64_t i = 0; i < limit; ++i) {
    if (json) json->mask(logits);
    const int32_t next = sampler.sample(logits);
    if (json) json->advance(next);
    if (!o.ignore_eos && tok.is_eog(next)) {
      r.finish = FinishReason::Stop;
      break;
    }
    r.tokens.push_back(next);
    sampler.accept(next);
    emit(stops.push(stream.push(next)));
    if (stops.stopped() || (json && json->complete())) {
      r.finish = FinishReason::Stop;
      break;
    }
    if (o.cancel != nullptr && o.cancel->load()) {
      r.finish = FinishReason::Cancelled;
      break;
    }
    if (i + 1 == limit) break;
    if (session.n_past() >= session.ctx()) break;  // context full: finish as "length"
    session.feed(&next, 1, logits.data(), false);
  }
  if (!stops.stopped()) emit(stops.push(stream.flush()) + stops.flush());
  r.generate_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace ts
