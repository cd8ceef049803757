#include "runtime/sequence_decoder.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "runtime/prompt_lookup.h"
#include "text/constraint_vocabulary.h"
#include "text/tokenizer.h"

namespace ts {

SequenceDecoder::SequenceDecoder(const Tokenizer& tok, DecodeOptions o,
                                 std::span<const int32_t> prompt, std::span<const int32_t> earlier)
    : tok_(tok),
      o_(std::move(o)),
      history_(earlier.begin(), earlier.end()),
      sampler_(o_.sampling),
      text_(tok, false, o_.shown_tokens),
      stops_([&] {
        std::vector<std::string> stops = o_.stop;
        if (o_.tools && !o_.tool_required) stops.emplace_back(o_.tools->format().open());
        return stops;
      }()),
      budget_(o_.reasoning, o_.reasoning_budget, o_.reasoning_open) {
  history_.insert(history_.end(), prompt.begin(), prompt.end());
  for (int32_t t : prompt) sampler_.accept(t);
  if ((o_.json || o_.tools) && o_.json_vocab == nullptr)
    o_.json_vocab = json_vocabulary(tok, o_.shown_tokens);
  if (o_.json) json_.emplace(o_.json_vocab, o_.json);
  // A required call: the prompt ends with the format's opening marker.
  if (o_.tools && o_.tool_required && !start_tool_call(""))
    fail(ErrorKind::Input, "the tool-call format cannot start a call");
}

bool SequenceDecoder::step(std::span<float> logits) {
  taken_ = false;
  if (done_) return false;
  if (json_) json_->mask(logits);
  if (tool_) tool_->mask(logits);
  budget_.mask(logits);
  const int32_t t = sampler_.sample(logits);
  // Under a tool constraint an end of generation comes only where the calls are whole.
  const bool in_call = tool_ || calling_;
  if (tok_.is_eog(t) && (in_call || !o_.ignore_eos)) {
    end(in_call ? FinishReason::ToolCalls : FinishReason::Stop);
    return false;
  }
  if (json_) json_->advance(t);
  if (tool_) tool_->advance(t);
  if (budget_.active()) budget_.advance(t, tok_.token_to_piece(t, true));
  taken_ = true;
  next_ = t;
  answer_.push_back(t);
  history_.push_back(t);
  sampler_.accept(t);
  if (tool_) {
    call_text_ += o_.json_vocab->pieces[static_cast<size_t>(t)];
    if (tool_->state().closed()) end(FinishReason::ToolCalls);
  } else if (calling_) {
    call_text_ += text_.push(t);
  } else {
    released_ += stops_.push(text_.push(t));
    const bool call = stops_.stopped() && o_.tools && stops_.matched() == o_.tools->format().open();
    if (call && !start_tool_call(stops_.after())) {
      end(FinishReason::Stop);
    } else if (!call && (stops_.stopped() || (json_ && json_->complete()))) {
      end(FinishReason::Stop);
    }
  }
  if (done_) return false;
  if (generated() >= limit()) end(FinishReason::Length);
  return !done_;
}

int64_t SequenceDecoder::limit() const {
  return o_.max_tokens < 0 ? o_.room : std::min(o_.max_tokens, o_.room);
}

std::vector<int32_t> SequenceDecoder::draft(int64_t most) {
  most = std::min(most, limit() - generated() - 1);
  if (most <= 0 || done_) return {};
  std::vector<int32_t> guess = lookup_draft(history_, most);
  drafted_ += static_cast<int64_t>(guess.size());
  return guess;
}

bool SequenceDecoder::start_tool_call(const std::string& after) {
  const ToolFormat& format = o_.tools->format();
  call_text_ = after;
  if (format.envelope() == nullptr) {  // read, not constrained
    calling_ = true;
    return true;
  }
  tool_.emplace(o_.json_vocab, o_.tools);
  // A marker that is the call's own beginning (Llama 3's bare JSON) is the constraint's too.
  return (!format.open_in_call() || tool_->advance_text(format.open())) &&
         tool_->advance_text(after);
}

void SequenceDecoder::finish(FinishReason reason) {
  if (!done_) end(reason);
}

void SequenceDecoder::end(FinishReason reason) {
  done_ = true;
  if (calling_)
    call_text_ += text_.flush();
  else if (!stops_.stopped())
    released_ += stops_.push(text_.flush()) + stops_.flush();
  // Cut by a limit between whole calls, the answer is those calls; inside one, the whole calls
  // before it (finish reason length).
  if (reason == FinishReason::Length && tool_ && tool_->complete())
    reason = FinishReason::ToolCalls;
  const bool in_call = tool_ || calling_;
  if (reason == FinishReason::ToolCalls || (reason == FinishReason::Length && in_call))
    calls_ = o_.tools->format().parse(call_text_, o_.tools.get());
  // An unconstrained call that does not read is no call: its text is the answer's, as written.
  if (calling_ && calls_.empty()) {
    released_ += std::string(o_.tools->format().open()) + call_text_;
    if (reason == FinishReason::ToolCalls) reason = FinishReason::Stop;
  }
  finish_ = reason;
}

std::string SequenceDecoder::take_text() {
  return std::exchange(released_, std::string());
}

std::vector<ToolCall> SequenceDecoder::tool_calls() const {
  return calls_;
}

}  // namespace ts
