// browser.mjs drives the dashboard in Debian's headless chromium through
// playwright-core (dashboard/browser_test.go runs it). It prints
// "need-step" when it wants the test to log a new step, and at the end one
// line of JSON with what it saw.
//
// Usage: node browser.mjs URL CHROMIUM OUTDIR check|perf|long  (run with
// NODE_PATH pointing at the node_modules holding playwright-core). "check"
// walks through the page on the test's small runs; "perf" times the large
// run of TestLargeRun (big/agent: 1,000 steps, 10,000 trajectories a step);
// "long" the trajectory of 30,000 tokens of TestLongTrajectory.
import { join } from "node:path";
import { withChromium } from "./chromium.mjs";

const [url, executablePath, outDir, mode] = process.argv.slice(2);

const out = { consoleErrors: [] };
await withChromium(executablePath, async (browser) => {
  const page = await browser.newPage();
  page.setDefaultTimeout(45000); // a CI machine runs other test packages beside this one
  // The API's 4xx answers to the bad input below are logged by the browser
  // as failed loads; those are expected, anything else is not.
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource: the server responded with a status of 4")) out.consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => out.consoleErrors.push(String(e)));

  if (mode === "perf") {
    await perf(page, out);
  } else if (mode === "long") {
    await long(page, out);
  } else {
    await check(page, out);
  }
});
console.log(JSON.stringify(out));

// perf times how long the large run's pages take from navigation to drawn.
async function perf(page, out) {
  let t0 = Date.now();
  await page.goto(url + "#run=big/agent&tab=charts");
  await page.waitForFunction(() => {
    const el = document.querySelector('.chart[data-metric="train/reward"] .series');
    return el && el.dataset.n === "1000";
  });
  out.chartsColdMs = Date.now() - t0; // includes the browser's first page load
  t0 = Date.now();
  await page.reload();
  await page.waitForFunction(() => {
    const el = document.querySelector('.chart[data-metric="train/reward"] .series');
    return el && el.dataset.n === "1000";
  });
  out.chartsMs = Date.now() - t0;
  out.charts = await page.locator(".chart").count();
  t0 = Date.now();
  await page.click('#tabs button[data-tab="trajectories"]');
  await page.waitForSelector("#t-list tbody tr[data-index]");
  out.trajectoriesMs = Date.now() - t0;
  out.rows = await page.locator("#t-list tbody tr[data-index]").count();
  t0 = Date.now();
  await openFirstTrajectory(page, out);
  out.trajectoryMs = Date.now() - t0;
  t0 = Date.now();
  await page.click('#tabs button[data-tab="checkpoints"]');
  await page.waitForSelector('#ckpt tbody tr[data-step="999"]');
  out.checkpointsMs = Date.now() - t0;
  out.checkpoints = await page.locator("#ckpt tbody tr").count();
}

// long times TestLongTrajectory's trajectory of 30,000 sampled tokens,
// from navigation to every token drawn, and how long the page then takes
// to answer a scroll to its end.
async function long(page, out) {
  const t0 = Date.now();
  await page.goto(url + "#run=long/agent&tab=trajectories&split=train&step=0&index=0");
  await page.waitForFunction(() => document.querySelectorAll("#t-detail .tok").length >= 30000, null, { timeout: 60000 });
  out.trajectoryMs = Date.now() - t0;
  out.tokens = await page.evaluate(() => document.querySelectorAll("#t-detail .tok").length);
  const t1 = Date.now();
  await page.evaluate(() => new Promise((done) => {
    document.querySelector("#t-detail .tok:last-child").scrollIntoView();
    requestAnimationFrame(() => requestAnimationFrame(done));
  }));
  out.scrollMs = Date.now() - t1;
}

// check walks through the page on the test's small runs.
async function check(page, out) {
  const series = (metric, run) => `.chart[data-metric="${metric}"] .series[data-run="${run}"]`;
  const points = async (metric, run) => Number(await page.getAttribute(series(metric, run), "data-n"));

  // Curves of the run, then another model overlaid.
  let t0 = Date.now();
  await page.goto(url + "#run=ttt/agent&tab=charts");
  await page.waitForSelector(series("train/reward", "ttt/agent"));
  out.chartsMs = Date.now() - t0;
  out.points = await points("train/reward", "ttt/agent");
  out.charts = await page.locator(".chart").count();
  out.polylinePoints = (await page.getAttribute(series("train/reward", "ttt/agent"), "points")).trim().split(/\s+/).length;
  await page.click('.run[data-id="ttt/baseline"] input[type=checkbox]');
  await page.waitForSelector(series("train/reward", "ttt/baseline"));
  out.overlayPoints = await points("train/reward", "ttt/baseline");
  await page.waitForSelector("#live.on");
  await page.screenshot({ path: join(outDir, "charts.png") });

  // Live: the test logs a step; the curve grows without a reload.
  console.log("need-step");
  await page.waitForFunction((sel) => {
    const el = document.querySelector(sel);
    return el && Number(el.dataset.n) === 13;
  }, series("train/reward", "ttt/agent"));
  out.livePoints = await points("train/reward", "ttt/agent");
  await page.waitForFunction(() => document.querySelector("#runhead").textContent.includes("step 12"));
  out.liveHead = await page.textContent("#runhead");

  // Trajectories: the latest step's list, sorted and filtered by reward.
  await page.click('#tabs button[data-tab="trajectories"]');
  await page.waitForSelector("#t-list tbody tr[data-index]");
  const rewards = async () => (await page.locator("#t-list tbody tr[data-index] td.reward").allTextContents()).map(Number);
  out.step = await page.inputValue("#t-step");
  out.rows = await rewards();
  await page.fill("#t-min", "0.5");
  await page.fill("#t-max", "0.7");
  await page.selectOption("#t-sort", "reward");
  await page.dispatchEvent("#t-max", "change");
  await page.waitForFunction(() => document.querySelectorAll("#t-list tbody tr[data-index]").length === 9);
  out.filtered = await rewards();
  await openFirstTrajectory(page, out);
  out.messages = await page.locator("#t-detail .msg").count();
  out.tokens = await page.locator("#t-detail .tok").count();
  out.toolCalls = await page.locator("#t-detail .toolcall").count();
  out.ruler = await page.locator("#t-detail .ruler").count();
  out.detailText = await page.textContent("#t-detail");
  await page.screenshot({ path: join(outDir, "trajectory.png") });

  // Bad input: a clear message, never a blank page.
  const bannerFor = async (hash) => {
    await page.goto("about:blank");
    await page.goto(url + hash);
    await page.waitForSelector("#banner:not([hidden])");
    return page.textContent("#banner");
  };
  out.unknownModel = await bannerFor("#run=ttt/nope");
  out.corruptHistory = await bannerFor("#run=bad/broken&tab=charts");
  out.corruptCharts = await page.locator('.chart[data-metric="train/reward"] .series').count();
  out.missingStep = await bannerFor("#run=ttt/agent&tab=trajectories&split=train&step=3");
}

// openFirstTrajectory clicks the list's first row and waits for its
// messages. On a loaded machine a click has been seen to leave the pane at
// "Pick a trajectory." (the list was being redrawn under the pointer: not
// understood yet), so it clicks up to three times, counting the retries in
// out.detailRetries, and otherwise fails saying what the pane shows.
async function openFirstTrajectory(page, out) {
  out.detailRetries = 0;
  for (let attempt = 1; ; attempt++) {
    await page.locator("#t-list tbody tr[data-index]").first().click();
    try {
      await page.waitForSelector("#t-detail .msg", { timeout: 15000 });
      return;
    } catch (e) {
      const shown = await page.textContent("#t-detail").catch(() => "(unreadable)");
      if (attempt < 3 && shown.includes("Pick a trajectory")) {
        out.detailRetries++;
        continue;
      }
      throw new Error(`no trajectory messages after ${attempt} click(s); the detail pane shows ${JSON.stringify(shown)}; list: ${JSON.stringify(await page.textContent("#t-stats").catch(() => ""))}: ${e.message}`);
    }
  }
}
