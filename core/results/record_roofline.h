/* core/results/record_roofline.h — a record's "roofline" object (results.h): the memory level and ceiling a cell
 * was held to, and the calibration's levels, written and read (untrusted) apart from results.c. */
#ifndef KHOST_CORE_RECORD_ROOFLINE_H
#define KHOST_CORE_RECORD_ROOFLINE_H

#include <cjson/cJSON.h>

#include "results/results.h"

/* Adds "roofline" to o when r has a level; nothing otherwise (older records stay as they were). */
void kh_record_roofline_add(cJSON *o, const kh_cell_record *r);
/* Reads o's "roofline" into r. Absent: r keeps "" / NAN / 0. Malformed: 0 and r keeps none of it, err set
 * and -1 when the object is there but not of this shape. */
int kh_record_roofline_read(const cJSON *o, kh_cell_record *r, char *err, size_t errlen);
#endif
