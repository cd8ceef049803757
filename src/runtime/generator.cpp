#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/error.h"
#include "runtime/prompt_lookup.h"
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
  if (o.lookup < 0 || o.lookup > kMaxLookup)
    fail(ErrorKind::Usage, "lookup must be between 0 and " + std::to_string(kMaxLookup) + ", got " +
                               std::to_string(o.lookup));
  // The logits of each row of the last pass: the sampled token's, then a draft token's each.
  std::vector<float> logits(static_cast<size_t>(V * (o.lookup + 1)));
  Sampler sampler(o.sampling);
  for (int32_t t : prompt) sampler.accept(t);

  auto t0 = Clock::now();
  session.feed(prompt.data(), static_cast<int64_t>(prompt.size()), logits.data(), false,
               o.prompt_inputs);
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
  // The text so far (prompt lookup's), and the tokens of the last pass: the one sampled before it,
  // then the draft; `row` is the row whose logits are sampled next.
  std::vector<int32_t> history;
  if (o.lookup > 0) {
    history.assign(o.earlier.begin(), o.earlier.end());
    history.insert(history.end(), prompt.begin(), prompt.end());
  }
  std::vector<int32_t> pass;
  size_t row = 0;
  // Rows past `row` hold draft tokens that were not taken: forgotten, as if never fed.
  const auto drop_untaken_rows = [&] {
    if (pass.size() > row + 1)
      session.truncate(session.n_past() - static_cast<int64_t>(pass.size() - row - 1));
  };
  for (int64_t i = 0; i < limit; ++i) {
    const std::span<float> cur(logits.data() + row * V, static_cast<size_t>(V));
    if (json) json->mask(cur);
    const int32_t next = sampler.sample(cur);
    if (json) json->advance(next);
    if (!o.ignore_eos && tok.is_eog(next)) {
      r.finish = FinishReason::Stop;
      break;
    }
    r.tokens.push_back(next);
    if (o.lookup > 0) history.push_back(next);
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
    if (row + 1 < pass.size() && next == pass[row + 1]) {  // the draft's token: its row is fed
      ++row;
      ++r.draft_matched;
      continue;
    }
    drop_untaken_rows();
    if (session.n_past() >= session.ctx()) break;  // context full: finish as "length"
    // A draft token becomes an answer token only with a row after it, so at most the answer's
    // room less one, and the context's room after `next`.
    pass = {next};
    const int64_t room = std::min({o.lookup, limit - i - 2, session.ctx() - session.n_past() - 1});
    if (room > 0) {
      const std::vector<int32_t> draft = lookup_draft(history, room);
      pass.insert(pass.end(), draft.begin(), draft.end());
      r.drafted += static_cast<int64_t>(draft.size());
    }
    row = 0;
    ++r.passes;
    if (pass.size() > 1) session.checkpoint();  // guesses a recurrent state cannot take back
    session.feed(pass.data(), static_cast<int64_t>(pass.size()), logits.data(), pass.size() > 1);
  }
  drop_untaken_rows();
  if (!stops.stopped()) emit(stops.push(stream.flush()) + stops.flush());
  r.generate_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace ts
