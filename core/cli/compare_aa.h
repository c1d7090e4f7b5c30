/* core/cli/compare_aa.h — the A/A section of `khost compare` (results/aa.h computes it) as markdown, JSON and
 * HTML. asked: --aa was given; a->same says whether the sets are one build on one machine, and a section asked
 * for on sets that are not says so first. */
#ifndef KHOST_CORE_COMPARE_AA_H
#define KHOST_CORE_COMPARE_AA_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "results/aa.h"

void kh_aa_markdown(FILE *f, const kh_aa *a, int asked, const kh_cmp_row *rows, const kh_cmp_rule *ru);
/* The "aa" member of the JSON: the summary and, per cell with a verdict, its detectable change. */
cJSON *kh_aa_json(const kh_aa *a, int asked, const kh_cmp_row *rows, int nr, const kh_cmp_rule *ru);
void kh_aa_html(FILE *f, const kh_aa *a, int asked, const kh_cmp_row *rows, const kh_cmp_rule *ru);
#endif
