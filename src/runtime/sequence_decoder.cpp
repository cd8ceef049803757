#include "runtime/sequence_decoder.h"

#include <algorithm>
#include <utility>

#include "runtime/prompt_lookup.h"
#include "text/tokenizer.h"

namespace ts {

SequenceDecoder::SequenceDecoder(const Tokenizer& tok, DecodeOptions o,
                                 std::span<const int32_t> prompt, std::span<const int32_t> earlier)
    : tok_(tok),
      o_(std::move(o)),
      history_(earlier.begin(), earlier.end()),
      sampler_(o_.sampling),
      text_(tok),
      stops_([&] {
        std::vector<std::string> stops = o_.stop;
        if (o_.tools && !o_.tool_required) stops.emplace_back(kToolCallOpen);
        return stops;
      }()) {
  history_.insert(history_.end(), prompt.begin(), prompt.end());
  for (int32_t t : prompt) sampler_.accept(t);
  if ((o_.json || o_.tools) && o_.json_vocab == nullptr)
    o_.json_vocab = std::make_shared<const JsonVocabulary>(tok);
  if (o_.json) json_.emplace(o_.json_vocab, o_.json);
  if (o_.tools && o_.tool_required) tool_.emplace(o_.json_vocab, o_.tools);
}

bool SequenceDecoder::step(std::span<float> logits) {
  taken_ = false;
  if (done_) return false;
  if (json_) json_->mask(logits);
  if (tool_) tool_->mask(logits);
  const int32_t t = sampler_.sample(logits);
  // Under a tool constraint an end of generation comes only where the calls are whole.
  if (tok_.is_eog(t) && (tool_ || !o_.ignore_eos)) {
    end(tool_ ? FinishReason::ToolCalls : FinishReason::Stop);
    return false;
  }
  if (json_) json_->advance(t);
  if (tool_) tool_->advance(t);
  taken_ = true;
  next_ = t;
  answer_.push_back(t);
  history_.push_back(t);
  sampler_.accept(t);
  if (tool_) {
    call_text_ += o_.json_vocab->pieces[static_cast<size_t>(t)];
    if (tool_->state().closed()) end(FinishReason::ToolCalls);
  } else {
    released_ += stops_.push(text_.push(t));
    const bool call = stops_.stopped() && o_.tools && stops_.matched() == kToolCallOpen;
    if (call && !start_tool_call(stops_.after())) {
      end(FinishReason::Stop);
    } else if (!call && (stops_.stopped() || (json_ && json_->complete()))) {
      end(FinishReason::Stop);
    }
  }
  if (done_) return false;
  const int64_t limit = o_.max_tokens < 0 ? o_.room : std::min(o_.max_tokens, o_.room);
  if (generated() >= limit) end(FinishReason::Length);
  return !done_;
}

std::vector<int32_t> SequenceDecoder::draft(int64_t most) {
  const int64_t limit = o_.max_tokens < 0 ? o_.room : std::min(o_.max_tokens, o_.room);
  most = std::min(most, limit - generated() - 1);
  if (most <= 0 || done_) return {};
  std::vector<int32_t> guess = lookup_draft(history_, most);
  drafted_ += static_cast<int64_t>(guess.size());
  return guess;
}

bool SequenceDecoder::start_tool_call(const std::string& after) {
  tool_.emplace(o_.json_vocab, o_.tools);
  call_text_ = after;
  return tool_->advance_text(after);
}

void SequenceDecoder::finish(FinishReason reason) {
  if (!done_) end(reason);
}

void SequenceDecoder::end(FinishReason reason) {
  done_ = true;
  if (!stops_.stopped()) released_ += stops_.push(text_.flush()) + stops_.flush();
  // Cut by a limit between whole calls, the answer is those calls; inside one, the whole calls
  // before it (finish reason length).
  if (reason == FinishReason::Length && tool_ && tool_->complete())
    reason = FinishReason::ToolCalls;
  finish_ = reason;
}

std::string SequenceDecoder::take_text() {
  return std::exchange(released_, std::string());
}

std::vector<ToolCall> SequenceDecoder::tool_calls() const {
  if (finish_ == FinishReason::ToolCalls || (finish_ == FinishReason::Length && tool_))
    return parse_tool_calls(call_text_);
  return {};
}

}  // namespace ts
