// Preloaded into every `npx` command of this project (.npmrc: node-options). It sets defaults for environment
// variables, and keeps the cdk8s CLI's report of a failed app to the app's own line and exit code (below), so that
// the plain `npx cdk8s synth` is quiet offline and on bad input: the cdk8s CLI reads every
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

// The cdk8s CLI reports an app that exited non-zero as an Error object (yargs prints it with its Node stack: four
// "at ChildProcess..." lines, node_modules/cdk8s-cli/lib/util.js `shell`) and exits 1, whatever the app's code. Our
// app has printed its own one line already (error: ...), so that report is dropped and the app's exit code is kept:
// a bad config through `npx cdk8s synth` is one line and exit 2, as through every other entry point.
if (isCdk8s) {
  const appFailed = /^command ".*" at .* returned a non-zero exit code (\d+)$/;
  let appCode;
  const consoleError = console.error;
  console.error = (...args) => {
    const match = args.length === 1 && args[0] instanceof Error && appFailed.exec(args[0].message);
    if (match) {
      appCode = Number(match[1]);
      return;
    }
    consoleError.apply(console, args);
  };
  process.on("exit", () => {
    if (appCode !== undefined) {
      process.exitCode = appCode;
    }
  });
}
