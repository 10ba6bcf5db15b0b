// Loading job files for the commands: the helpers live in train
// (roles/sync_job.h) with the roles that also read jobs.
#pragma once

#include "tenax/roles/sync_job.h"
