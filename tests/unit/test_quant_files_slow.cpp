// Every quantised tiny-moe file's perplexity against llama.cpp's (label slow: ~5 minutes).
#define TS_QUANT_FILES_ALL
#include "test_quant_files.cpp"
