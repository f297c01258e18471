// Preloaded into every `npx` command of this project (.npmrc: node-options). It only sets defaults for
// environment variables, so that the plain `npx cdk8s synth` is quiet offline: the cdk8s CLI reads every
// option from a CDK8S_ variable, and its upgrade check otherwise fetches registry.npmjs.org and prints an
// HTTP stack trace plus "A new version undefined of cdk8s-cli is available". An explicit value wins.
// The jsii banner about Node 20's end of life (printed by every Python app that imports a jsii library) is
// silenced the same way scripts/env.sh does.
"use strict";
// Only for the cdk8s CLI: the CDK CLI reads every CDK* variable as an option too, and would report
// CDK8S_CHECK_UPGRADE as the unknown option "--8SCheckUpgrade".
const isCdk8s = /cdk8s/.test(process.argv[1] || "");
const defaults = {
  ...(isCdk8s ? { CDK8S_CHECK_UPGRADE: "false" } : {}),
  JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION: "20",
};
for (const [name, value] of Object.entries(defaults)) {
  if (process.env[name] === undefined) {
    process.env[name] = value;
  }
}
