// Loading job files for the commands: the helpers live in train
// (train/sync_job.h) with the roles that also read jobs.
#pragma once

#include "tenax/train/sync_job.h"
