// Every low-bit tiny-moe file's perplexity against llama.cpp's (label slow: minutes).
#define TS_LOWBIT_FILES_ALL
#include "test_lowbit_files.cpp"
