// Says in one line when this Node.js is not one the pinned jsii runtime supports, and nothing when it is.
// jsii's own verdict (@jsii/check-node, which the cdk8s CLI pins in package-lock.json; the same release table
// as the runtime inside the Python jsii package: tests/test_node_support.py), instead of the 11-line banner
// jsii prints in every process (scripts/env.sh silences that one after set-up has said this).
// Usage (from the repository root): node scripts/node-support.cjs   -> stdout: "" or one line; exit 0.
"use strict";
const { NodeRelease } = require("@jsii/check-node");

const { nodeRelease, knownBroken } = NodeRelease.forThisRuntime();
const supported = NodeRelease.ALL_RELEASES.filter((r) => r.supported).map((r) => r.majorVersion);
supported.sort((a, b) => a - b);
let why = null;
if (!nodeRelease || nodeRelease.untested) {
  why = "is not a release jsii has tested";
} else if (!nodeRelease.supported) {
  why = `is past the pinned jsii's support since ${nodeRelease.endOfJsiiSupportDate.toISOString().slice(0, 10)}`;
} else if (knownBroken) {
  why = `has known problems with jsii (supported: ${nodeRelease.supportedRange.raw})`;
}
if (why) {
  console.log(`warning: Node.js ${process.version} ${why}; the pinned tools support Node.js ` +
    `${supported.join(" and ")} (README.md, "The two commands")`);
}
