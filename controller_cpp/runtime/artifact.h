// Before anything is loaded: re-hash the stage's artifact, check that every file the plan
// uses is covered by its manifest, and (unless explicitly allowed) that it is qualified.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "contract/manifest.h"
#include "runtime/plan.h"

namespace omni_edge {

Result<contract::VerifiedManifest> VerifyStageArtifact(const StagePlan& stage, bool require_qualified);

// The same checks for a stage whose artifact `verified` is (already re-hashed for another stage
// of the plan that shares it): the files it uses are covered, and it is qualified if required.
Status CheckStageArtifact(const StagePlan& stage, const contract::VerifiedManifest& verified, bool require_qualified);

}  // namespace omni_edge
