/* tests/kit/fake_half.c — a GPU half for test_kit_half: exports FAKE_ENTRY (the header FAKE_VERSION with
 * the sizes 8 and 16), and a second symbol that returns NULL (a half without a table). */
#include "khost/kit/half.h"
#include "khost/abi.h"

static const kh_half_header g_head = {.version = FAKE_VERSION, .n_sizes = 2, .sizes = {8, 16}};

KH_EXPORT const kh_half_header *fake_half_entry(void);
KH_EXPORT const kh_half_header *fake_half_entry(void) { return &g_head; }
KH_EXPORT const kh_half_header *fake_half_none(void);
KH_EXPORT const kh_half_header *fake_half_none(void) { return 0; }
