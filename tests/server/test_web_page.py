"""The chat page at / in headless Chromium (Debian's `chromium` and `chromium-driver`, driven by
selenium from PyPI): it loads, names the model, streams an answer to a message (the answer the
API gives), stops a generation, folds a thinking model's reasoning and asks for the API key.
Screenshots of each step go to TS_SCREENSHOT_DIR (default: web_screenshots/ in the working
directory) and their paths are printed into the test log. run_web_tests.py installs what it can
and skips, saying why, where Chromium cannot be had."""

import os
import shutil
import tempfile
import time
import unittest

from server_util import Server, binary_from_env

MODEL = "tiny-moe-q8_0"
THINK_TEMPLATE = (
    "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor -%}"
    "{%- if add_generation_prompt %}assistant:"
    "{% if enable_thinking is not defined or enable_thinking %} <think>\n{% endif %}"
    "{% endif %}{# models write </think> to end their thinking #}"
)


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1200,900"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


class WebPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()
        cls.shots = os.path.abspath(os.environ.get("TS_SCREENSHOT_DIR", "web_screenshots"))
        os.makedirs(cls.shots, exist_ok=True)
        cls.driver = browser()

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()

    def shot(self, name):
        path = os.path.join(self.shots, name + ".png")
        self.driver.save_screenshot(path)
        print("screenshot: " + path)

    def wait(self, pred, timeout=60, what="the page"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.1)
        self.shot("timeout")
        self.fail("waited %d s for %s" % (timeout, what))

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def set_value(self, element_id, value):
        self.js("document.getElementById(arguments[0]).value = arguments[1]", element_id, value)

    def send(self, text):
        from selenium.webdriver.common.by import By

        box = self.driver.find_element(By.ID, "prompt")
        box.clear()
        box.send_keys(text)
        self.driver.find_element(By.ID, "send").click()

    def last_answer(self):
        return self.js(
            "const m = document.querySelectorAll('.msg.assistant'); const b = m[m.length - 1];"
            "return b ? {content: b.querySelector('.content').textContent,"
            " finish: b.dataset.finish, error: b.classList.contains('error'),"
            " reasoning: b.querySelector('.reasoning').textContent,"
            " reasoningShown: !b.querySelector('.reasoning').hidden,"
            " reasoningOpen: b.querySelector('.reasoning').open} : null")

    def answered(self):
        a = self.last_answer()
        return a if a and a["finish"] else None

    def test_chat_stream_and_stop(self):
        with Server(self.binary, "--parallel", "2", "-c", "4096", "--log-format", "off") as s:
            d = self.driver
            d.get(s.base_url + "/")
            self.wait(lambda: self.js("return document.getElementById('model').textContent") == MODEL,
                      what="the model's name")
            self.shot("1-loaded")
            # An answer, streamed: the one the API gives for the same settings.
            self.js("document.getElementById('toggle-settings').click()")
            self.set_value("temperature", "0")
            self.set_value("max-tokens", "24")
            self.send("Once upon a time")
            a = self.wait(self.answered, what="the streamed answer")
            self.shot("2-answered")
            self.assertFalse(a["error"], a)
            _, want, _ = s.request("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "Once upon a time"}],
                "max_tokens": 24, "temperature": 0})
            self.assertEqual(a["content"], want["choices"][0]["message"]["content"])
            self.assertEqual(a["finish"], "length")
            stats = self.js("return document.getElementById('stats').textContent")
            self.assertRegex(stats, r"^24 tokens, [\d.]+ tokens/s")
            # Stop: a long generation is cut short, and its slot is freed. In a new chat, this
            # prompt's greedy answer counts on for thousands of tokens.
            self.driver.find_element("id", "clear").click()
            self.assertEqual(self.js("return document.querySelectorAll('.msg').length"), 0)
            self.set_value("max-tokens", "4000")
            self.send("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,")
            self.wait(lambda: len((self.last_answer() or {}).get("content", "")) > 20,
                      what="the long answer to start")
            self.driver.find_element("id", "stop").click()
            a = self.wait(self.answered, what="the stop")
            self.shot("3-stopped")
            self.assertEqual(a["finish"], "stopped")
            self.assertIn("(stopped)", self.js("return document.getElementById('stats').textContent"))
            self.assertTrue(self.js("return !document.getElementById('send').disabled"))
            self.assertIs(s.wait_idle(15), True)
            # The stopped answer stays in the conversation, as far as it got.
            self.assertEqual(self.js("return document.querySelectorAll('.msg').length"), 2)
            self.assertGreater(len(a["content"]), 20)
        self.assertEqual(s.exit_code, 0)

    def test_reasoning_is_folded(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "think.jinja")
            with open(path, "w") as f:
                f.write(THINK_TEMPLATE)
            with Server(self.binary, "--chat-template", path, "--parallel", "1", "-c", "512",
                        "--log-format", "off") as s:
                self.driver.get(s.base_url + "/")
                self.wait(lambda: self.js("return document.getElementById('model').textContent") == MODEL)
                self.set_value("max-tokens", "12")
                self.send("Once upon a time")
                a = self.wait(self.answered, what="the answer")
                self.shot("4-reasoning")
                self.assertTrue(a["reasoningShown"], a)
                self.assertFalse(a["reasoningOpen"], a)  # folded until clicked
                self.assertGreater(len(a["reasoning"]), len("Reasoning"))

    def test_api_key_dialog(self):
        with Server(self.binary, "--api-key", "s3cret", "--parallel", "1", "-c", "512",
                    "--log-format", "off") as s:
            d = self.driver
            d.get(s.base_url + "/")
            self.js("localStorage.clear()")
            d.get(s.base_url + "/")
            self.wait(lambda: self.js(
                "return document.getElementById('key-dialog').classList.contains('open')"),
                what="the key dialog")
            self.shot("5-key-dialog")
            d.find_element("id", "api-key").send_keys("s3cret")
            d.find_element("id", "save-key").click()
            self.wait(lambda: self.js("return document.getElementById('model').textContent") == MODEL,
                      what="the model after the key")
            self.set_value("max-tokens", "4")
            self.set_value("temperature", "0")  # greedy: the answer's end is the same every run
            self.send("Hi")
            a = self.wait(self.answered, what="the answer with the key")
            self.assertFalse(a["error"], a)
            self.assertEqual(a["finish"], "length")
            self.js("localStorage.clear()")


if __name__ == "__main__":
    unittest.main()
