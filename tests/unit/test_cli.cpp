// The `turbospark` binary as a user meets it: exit codes and one-line errors for bad input,
// greedy generation on the bundled model following llama.cpp's, and `chat` driven through a
// pseudo-terminal for two turns.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace ts {
namespace {

int run(const std::string& args, std::string* out = nullptr) {
  return test::run_command(test::binary_path() + " " + args, out);
}

TEST(Cli, HelpListsEverySubcommand) {
  std::string out;
  ASSERT_EQ(run("--help", &out), 0);
  for (const char* cmd : {"inspect", "logits", "perplexity", "run", "chat"})
    EXPECT_NE(out.find(cmd), std::string::npos) << cmd;
}

TEST(Cli, UnknownFlagIsAUsageError) {
  std::string out;
  EXPECT_EQ(run("run --no-such-flag", &out), 1);
  EXPECT_NE(out.find("error"), std::string::npos) << out;
}

TEST(Cli, BadNumbersNameTheFlagAndItsBound) {
  for (const auto& [args, want] :
       {std::pair<std::string, std::string>{"bench --tg-prompt 0",
                                            "--tg-prompt: must be at least 1, got 0"},
        {"run -c -5 -p hi", "--ctx-size: must be at least 1, got -5"},
        {"run -t many -p hi", "--threads: 'many' is not a number"}}) {
    std::string out;
    EXPECT_EQ(run(args, &out), 1) << args;
    EXPECT_NE(out.find(want), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
  }
}

TEST(Cli, MissingModelExitsWith2AndNamesIt) {
  std::string out;
  EXPECT_EQ(run("inspect /nonexistent/model.gguf", &out), 2);
  EXPECT_NE(out.find("/nonexistent/model.gguf"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
}

TEST(Cli, GarbageFileIsRefusedWithExit2) {
  const std::string path = test::scratch_path("garbage.gguf");
  std::ofstream(path) << "this is not a model file at all, just some text that is long enough";
  std::string out;
  EXPECT_EQ(run("run -m " + path + " -p hi", &out), 2);
  EXPECT_NE(out.find("not a GGUF file"), std::string::npos) << out;
}

TEST(Cli, EmptyPromptAndContextOverflowAreClearErrors) {
  std::string out;
  EXPECT_EQ(run("run -p ''", &out), 1);
  EXPECT_NE(out.find("prompt is empty"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(
      run("run -c 8 -p 'a prompt that is certainly longer than eight tokens of context'", &out), 1);
  EXPECT_NE(out.find("exceed the context"), std::string::npos) << out;
}

// --json-schema: the answer is an instance; a schema that asks what is not implemented, or two
// of the JSON flags at once, is a one-line usage error.
TEST(Cli, JsonSchemaShapesTheAnswer) {
  const std::string schema =
      R"('{"type": "object", "properties": {"n": {"type": "integer"}, "k": {"enum": ["a", "b"]}},)"
      R"( "required": ["n", "k"], "additionalProperties": false}')";
  std::string out;
  ASSERT_EQ(
      run("run -p 'The dog' --temp 0.8 -s 4 -n 300 --json-schema " + schema + " 2>/dev/null", &out),
      0)
      << out;
  const size_t open = out.find('{');
  ASSERT_NE(open, std::string::npos) << out;
  const nlohmann::json answer = nlohmann::json::parse(out.substr(open), nullptr, false);
  ASSERT_TRUE(answer.is_object()) << out;
  EXPECT_EQ(answer.size(), 2u) << out;
  EXPECT_TRUE(answer["n"].is_number_integer()) << out;
  EXPECT_TRUE(answer["k"] == "a" || answer["k"] == "b") << out;
  for (const auto& [args, want] :
       {std::pair<std::string, std::string>{
            R"(--json-schema '{"type": "object", "properties": {"a": {"pattern": "x"}}}')",
            "json_schema at #/properties/a: the keyword pattern is not supported"},
        {"--json-schema '{'", "--json-schema is not valid JSON"},
        {"--json-schema '" + std::string(65, '[') + std::string(65, ']') + "'",
         "--json-schema nests arrays and objects deeper than 64 levels"},
        {R"(--json-mode --json-schema '{"type": "object"}')", "exclude each other"}}) {
    out.clear();
    EXPECT_EQ(run("run -p hi " + args, &out), 1) << args;
    EXPECT_NE(out.find(want), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
  }
}

TEST(Cli, GreedyRunOnTheBundledModelFollowsLlamaCpp) {
  // llama.cpp gives this continuation on both the bf16 and the q8_0 tiny-moe files.
  std::string out;
  ASSERT_EQ(
      run("run -p 'In the morning, the children walked to the school' -n 24 --temp 0 --ignore-eos "
          "--no-display-prompt 2>/dev/null",
          &out),
      0);
  EXPECT_EQ(out,
            ", and the children, and the children, and the children, and the children, to their "
            "children, to their "
            "children\n");
}

// Reads from the pty until `marker` has appeared `count` times or 60 s pass.
bool read_until(int fd, std::string& buf, const std::string& marker, int count) {
  for (int waited = 0; waited < 600; ++waited) {
    int seen = 0;
    for (size_t p = buf.find(marker); p != std::string::npos; p = buf.find(marker, p + 1)) ++seen;
    if (seen >= count) return true;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 100) > 0) {
      char tmp[4096];
      const ssize_t n = ::read(fd, tmp, sizeof tmp);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
    }
  }
  return false;
}

TEST(Cli, ChatThroughAPseudoTerminalForTwoTurns) {
  int fd = -1;
  const pid_t pid = ::forkpty(&fd, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string bin = test::binary_path();
    ::execl(bin.c_str(), bin.c_str(), "chat", "-n", "12", "--temp", "0", "-t", "1",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string screen;
  ASSERT_TRUE(read_until(fd, screen, "> ", 1)) << screen;
  ASSERT_EQ(::write(fd, "The old city\r", 13), 13);
  ASSERT_TRUE(read_until(fd, screen, "> ", 2)) << screen;
  ASSERT_EQ(::write(fd, "The river\r", 10), 10);
  ASSERT_TRUE(read_until(fd, screen, "> ", 3)) << screen;
  ASSERT_EQ(::write(fd, "/exit\r", 6), 6);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fd);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << screen;
  // Both answers were printed: text between the prompts, not just the echo.
  const size_t second = screen.find("> ", screen.find("The old city"));
  EXPECT_GT(second - screen.find("The old city"), 20u) << screen;
}

// Slash commands act on the conversation instead of going to the model; a conversation the
// template refuses (raise_exception) is reported and dropped, and the chat goes on.
TEST(Cli, ChatSlashCommandsAndTemplateRefusals) {
  const std::string tmpl = test::scratch_path("refuse.jinja");
  std::ofstream(tmpl) << "{% for m in messages %}{% if m.content == 'bad' %}"
                         "{{ raise_exception('no bad words') }}{% endif %}{{ m.content }} "
                         "{% endfor %}";
  const std::string saved = test::scratch_path("conversation.json");
  std::remove(saved.c_str());
  std::string out;
  const int status = test::run_command("printf 'bad\\nOnce upon a time\\n/save " + saved +
                                           "\\n/clear\\n/save " + saved + ".empty\\n/load " +
                                           saved + "\\n/help\\n/exit\\n' | " + test::binary_path() +
                                           " chat -n 4 --temp 0 -t 1 --chat-template " + tmpl,
                                       &out);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("chat: chat template: no bad words"), std::string::npos) << out;
  EXPECT_NE(out.find("saved 2 messages"), std::string::npos) << out;  // "bad" was dropped
  EXPECT_NE(out.find("saved 0 messages"), std::string::npos) << out;  // after /clear
  EXPECT_NE(out.find("loaded 2 messages"), std::string::npos) << out;
  EXPECT_NE(out.find("/clear start again"), std::string::npos) << out;
  std::ifstream f(saved);
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["messages"][0]["content"], "Once upon a time");
  EXPECT_EQ(j["messages"][1]["role"], "assistant");
}

// llama.cpp habits: -f reads the prompt from a file, -cnv is the chat command, a flag that means
// nothing here is refused with a line that says so (not a parse of "-ngl" as "-n gl"), and
// --version prints one line.
TEST(Cli, LlamaCppHabits) {
  const std::string bin = test::binary_path();
  const std::string prompt = test::scratch_path("prompt.txt");
  std::ofstream(prompt) << "Once upon a time";
  std::string from_file, from_flag;
  EXPECT_EQ(
      test::run_command(bin + " run -f " + prompt + " -n 6 --temp 0 -t 1 2>/dev/null", &from_file),
      0);
  EXPECT_EQ(test::run_command(bin + " run -p 'Once upon a time' -n 6 --temp 0 -t 1 2>/dev/null",
                              &from_flag),
            0);
  EXPECT_EQ(from_file, from_flag);
  std::string out;
  EXPECT_EQ(test::run_command(bin + " run -ngl 99 -p x", &out), 1) << out;
  EXPECT_NE(out.find("-ngl offloads layers in llama.cpp"), std::string::npos) << out;
  EXPECT_EQ(test::run_command("echo /exit | " + bin + " run -cnv -sys 'Be brief' -t 1", &out), 0)
      << out;
  EXPECT_NE(out.find("chat: "), std::string::npos) << out;
  std::string version;
  EXPECT_EQ(test::run_command(bin + " --version", &version), 0) << version;
  EXPECT_EQ(version.rfind("turbospark ", 0), 0u) << version;
  EXPECT_EQ(std::count(version.begin(), version.end(), '\n'), 1) << version;
}

// A harmony template (gpt-oss's channels) in chat: with a reasoning budget the analysis ends
// after 4 tokens and the final channel follows; --reasoning hide prints only the final channel,
// show prints the analysis before it; the channel markers are printed by neither.
TEST(Cli, ChatHarmonyReasoningBudget) {
  const std::string bin = test::binary_path();
  const std::string tmpl = test::scratch_path("harmony.jinja");
  std::ofstream(tmpl)
      << "{%- for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>"
         "{% endfor -%}{%- if add_generation_prompt %}<|start|>assistant<|channel|>analysis"
         "<|message|>{% endif %}";
  const auto chat = [&](const std::string& flags) {
    std::string out;
    EXPECT_EQ(
        test::run_command("echo 'Once upon a time' | " + bin + " chat --chat-template " + tmpl +
                              " --ignore-eos -n 40 --temp 0 -t 1 " + flags + " 2>/dev/null",
                          &out),
        0)
        << out;
    return out;
  };
  const std::string hidden = chat("--reasoning hide --reasoning-budget 4");
  const std::string shown = chat("--reasoning show --reasoning-budget 4");
  const std::string unlimited = chat("--reasoning hide");
  EXPECT_EQ(hidden.find("<|"), std::string::npos) << hidden;
  EXPECT_EQ(shown.find("<|"), std::string::npos) << shown;
  EXPECT_GT(hidden.size(), std::string("> \n> ").size()) << hidden;  // the final channel
  EXPECT_GT(shown.size(), hidden.size()) << shown;
  // Without a budget the model never leaves the analysis: nothing is printed.
  EXPECT_EQ(unlimited, "> \n> ") << unlimited;
}

// -c above the trained context (1024 for the bundled model) warns; a prompt longer than the
// context is refused before any of it is printed.
TEST(Cli, ContextChecks) {
  const std::string bin = test::binary_path();
  std::string out;
  EXPECT_EQ(test::run_command(bin + " run -c 2000 -p Hi -n 1 -t 1", &out), 0) << out;
  EXPECT_NE(out.find("warning: -c 2000 is above the 1024 tokens"), std::string::npos) << out;
  std::string plain;
  EXPECT_EQ(test::run_command(bin + " run -p Hi -n 1 -t 1", &plain), 0) << plain;
  EXPECT_EQ(plain.find("warning"), std::string::npos) << plain;  // the default -c does not warn
  std::string stdout_only;
  EXPECT_EQ(test::run_command(bin + " run -c 4 -p 'Once upon a time there was' -t 1 2>/dev/null",
                              &stdout_only),
            1);
  EXPECT_EQ(stdout_only, "");
}

}  // namespace
}  // namespace ts
