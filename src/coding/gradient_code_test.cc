#include "tenax/coding/gradient_code.h"
