// `turbospark quantize`'s perplexity on tiny-moe against llama.cpp's own files (label slow).
#define TS_QUANTIZE_CMD_ALL
#include "test_quantize_cmd.cpp"
