/* cntk_api.h — the model-level kh_backend_api members (cntk_api.c): the session layer's compile frame, the
 * checks common to every device, then the executor of the model's device. cntk_entry.c hands them to the
 * session layer with the session members. */
#ifndef KHOST_CNTK_API_H
#define KHOST_CNTK_API_H

#include "plan/plan.h"

/* compile .. memory_info and profile; the session members are left NULL (the session layer fills them). */
extern const kh_backend_api cntk_model_api;

#endif
