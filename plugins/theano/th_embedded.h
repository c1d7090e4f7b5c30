/* th_embedded.h — support-code texts compiled into the plugin (th_embed.cmake writes the table). */
#ifndef TH_EMBEDDED_H
#define TH_EMBEDDED_H

#include <stddef.h>

typedef struct th_embedded_file {
    const char *name; /* as included: "khost/kit/formulas.h", "th_rt.h" */
    const char *text;
    size_t len;
} th_embedded_file;

extern const th_embedded_file th_embedded_files[]; /* ends with a NULL name */

#endif
