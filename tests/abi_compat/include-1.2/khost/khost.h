/* khost/khost.h — everything a module needs from the host: include this one header. */
#ifndef KHOST_KHOST_H
#define KHOST_KHOST_H
#include "khost/abi.h"
#include "khost/backend.h"
#include "khost/model.h"
#include "khost/task.h"
#include "khost/tensor.h"
#endif
