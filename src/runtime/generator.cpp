#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/error.h"
#include "runtime/prompt_lookup.h"
#include "runtime/sequence_decoder.h"
#include "runtime/session.h"

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
  auto t0 = Clock::now();
  session.feed(prompt.data(), static_cast<int64_t>(prompt.size()), logits.data(), false);
  r.prompt_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  t0 = Clock::now();
  DecodeOptions d;
  d.max_tokens = o.max_tokens;
  d.room = session.ctx() - session.n_past();
  d.ignore_eos = o.ignore_eos;
  d.stop = o.stop;
  d.sampling = o.sampling;
  d.json = o.json;
  d.json_vocab = o.json_vocab;
  SequenceDecoder dec(tok, std::move(d), prompt, o.earlier);
  const auto emit = [&] {
    const std::string s = dec.take_text();
    if (s.empty()) return;
    r.text += s;
    on_text(s);
  };
  // The tokens of the last pass: the one sampled before it, then the guesses (none for the
  // prompt's pass, whose last row is the one sampled).
  std::vector<int32_t> pass;
  for (;;) {
    const size_t row = dec.verify(logits.data(), static_cast<size_t>(V), pass, 0,
                                  [&](std::span<const float>) { emit(); });
    // Rows past `row` hold guesses that were not taken: forgotten, as if never fed.
    if (pass.size() > row + 1)
      session.truncate(session.n_past() - static_cast<int64_t>(pass.size() - row - 1));
    if (!dec.done() && o.cancel != nullptr && o.cancel->load()) dec.finish(FinishReason::Cancelled);
    emit();
    if (dec.done()) break;
    pass = {dec.next()};
    const std::vector<int32_t> draft =
        dec.draft(std::min(o.lookup, session.ctx() - session.n_past() - 1));
    pass.insert(pass.end(), draft.begin(), draft.end());
    ++r.passes;
    if (pass.size() > 1) session.checkpoint();  // guesses a recurrent state cannot take back
    session.feed(pass.data(), static_cast<int64_t>(pass.size()), logits.data(), pass.size() > 1);
  }
  r.tokens = dec.answer();
  r.finish = dec.finish_reason();
  r.drafted = dec.drafted();
  r.draft_matched = dec.draft_matched();
  r.generate_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace ts
