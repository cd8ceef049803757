// The pre-tokenizer regexes behind each GGUF `tokenizer.ggml.pre` name. They are the models' own
// Hugging Face `tokenizer.json` patterns, in the form llama.cpp uses them (case-insensitive
// contraction groups spelled out as [sS] classes), so that our words match llama.cpp's.
#include <map>

#include "core/error.h"
#include "text/pretokenizer.h"

namespace ts {
namespace {

// GPT-2's pattern: contractions, letters, digits, other symbols, whitespace.
const char* const kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

// Llama 3 / Qwen 2 family: contractions in either case, a letter run with one leading
// non-letter, digit groups of at most 3 (Qwen 2: single digits), newlines kept with symbols.
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Mistral's Tekken: an upper-case run may lead a lower-case run (camel-case words split).
const char* const kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char* const kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Kimi K2's tiktoken pattern: Han runs alone, then GPT-4o's words of non-Han letters. Its class
// intersections ([...&&[^\p{Han}]]) are written as a negative lookahead before each letter, which
// PCRE2 has; its case-insensitive contractions as the [sS] classes. llama.cpp's hand-written
// splitter for it does not split camel case (HelloWorld) as the model's own tokenizer does: this
// follows the model's.
const char* const kKimiK2 =
    "\\p{Han}+|"
    "[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])*"
    "(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])+"
    "(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// DeepSeek LLM: letters of the Latin, Greek, Cyrillic, ... blocks listed explicitly (the model's
// own class), ASCII / full-width punctuation runs, trailing whitespace, CJK runs, digit runs.
const char* const kDeepseekLlmLetters =
    "\\s?["
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
    "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
    "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}"
    "\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"
    "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}"
    "\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
    "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}"
    "\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
    "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}"
    "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"
    "]+";

const char* const kCjk = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

using Patterns = std::vector<std::string>;

const std::map<std::string, Patterns>& table() {
  static const std::map<std::string, Patterns> t = [] {
    std::map<std::string, Patterns> m;
    const Patterns deflt = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
    const Patterns gpt2 = {kGpt2};
    const Patterns llama3 = {kLlama3};
    const Patterns qwen2 = {kQwen2};
    const Patterns starcoder = {"\\p{N}", kGpt2};
    m["default"] = deflt;
    for (const char* n : {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                          "dbrx", "smaug-bpe", "chatglm-bpe", "glm4"})
      m[n] = llama3;
    m["deepseek-llm"] = {
        "[\r\n]",
        kDeepseekLlmLetters,
        "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
        "\\s+$",
        kCjk,
        "\\p{N}+"};
    m["deepseek-coder"] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"};
    m["deepseek-v3"] = {"\\p{N}{1,3}",
                        "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
                        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                        "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
                        "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
    m["falcon"] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
    for (const char* n :
         {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})
      m[n] = starcoder;
    // "gpt-neox" is not a name llama.cpp's converter writes (its GPT-NeoX vocab carries no pre
    // key); it is accepted as the GPT-2 pattern that GPT-NeoX's tokenizer.json uses.
    for (const char* n : {"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "exaone4",
                          "gpt-neox", "jina-es", "jina-de", "gigachat", "a.x-4.0", "mellum"})
      m[n] = gpt2;
    for (const char* n : {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "grok-2"})
      m[n] = qwen2;
    m["tekken"] = {kTekken};
    m["gpt-4o"] = {kGpt4o};
    m["llama4"] = {kGpt4o};
    m["kimi-k2"] = {kKimiK2};
    m["seed-coder"] = {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    for (const char* n : {"poro-chat", "bloom", "gpt3-finnish"})
      m[n] = {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"};
    m["viking"] = {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+",
                   "\\p{N}"};
    return m;
  }();
  return t;
}

}  // namespace

std::vector<std::string> pre_tokenizer_patterns(const std::string& pre_name,
                                                const std::string& what) {
  const auto& t = table();
  const auto it = t.find(pre_name.empty() ? std::string("default") : pre_name);
  if (it == t.end()) {
    fail(ErrorKind::Unsupported,
         what + ": tokenizer.ggml.pre = '" + pre_name + "' is not a pre-tokenizer we know");
  }
  return it->second;
}

bool pre_tokenizer_ignores_merges(const std::string& pre_name) {
  return pre_name == "llama3" || pre_name == "llama-v3" || pre_name == "llama-bpe" ||
         pre_name == "falcon3" || pre_name == "falcon-h1" || pre_name == "pixtral" ||
         pre_name == "tekken";
}

}  // namespace ts
