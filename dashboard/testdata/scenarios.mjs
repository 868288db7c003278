// scenarios.mjs drives one scenario of the dashboard in Debian's headless
// chromium through playwright-core (dashboard/browser_cases_test.go runs
// it) and prints one line of JSON with what it saw, page errors included.
//
// Usage: node scenarios.mjs URL CHROMIUM SCENARIO  (NODE_PATH pointing at
// the node_modules holding playwright-core).
import { withChromium } from "./chromium.mjs";

const [url, executablePath, scenario] = process.argv.slice(2);

// open loads the page at hash from a blank one.
async function open(page, hash) {
  await page.goto("about:blank");
  await page.goto(url + hash);
}

const scenarios = {
  // Trajectories of p/odd, step 0, each opened: what the detail pane shows.
  async odd(page, out) {
    out.details = [];
    for (let i = 0; i < 4; i++) {
      await open(page, `#run=p/odd&tab=trajectories&split=train&step=0&index=${i}`);
      let text;
      try {
        await page.waitForSelector("#t-detail .msg", { timeout: 8000 });
        text = await page.textContent("#t-detail");
      } catch (e) {
        text = "NOT OPENED: " + (await page.textContent("#t-detail"));
      }
      out.details.push({
        text,
        toolCalls: await page.locator("#t-detail .toolcall").count(),
        tokens: await page.locator("#t-detail .tok").count(),
        titles: await page.$$eval("#t-detail .tok", (ts) => ts.map((t) => t.title)),
      });
    }
  },
  // The charts of p/a with p/b overlaid: each one's accessible name (its
  // svg's role and aria-label) and the rows of its data table once opened.
  async charts(page, out) {
    await open(page, "#run=p/a&tab=charts&overlay=p/b");
    await page.waitForSelector('.chart[data-metric="train/reward"] .series[data-run="p/b"]');
    out.charts = await page.$$eval(".chart", (cs) => cs.map((c) => {
      const svg = c.querySelector("svg");
      return { metric: c.dataset.metric, role: svg.getAttribute("role"), label: svg.getAttribute("aria-label") || "" };
    }));
    const reward = page.locator('.chart[data-metric="train/reward"]');
    if (!(await reward.locator("summary").count())) return;
    await reward.locator("summary").click();
    await reward.locator("table tbody tr").first().waitFor();
    out.tableHead = await reward.locator("table thead").textContent();
    out.tableRows = await reward.locator("table tbody tr").evaluateAll((rs) => rs.map((r) => [...r.cells].map((c) => c.textContent).join(" ")));
  },

  // The keyboard alone: Tab to model p/b and press Enter, then to the
  // Trajectories tab, then to a trajectory and press Enter.
  async keyboard(page, out) {
    await open(page, "#run=p/a&tab=charts");
    await page.waitForSelector(".chart");
    const tabTo = async (test) => {
      for (let i = 0; i < 80; i++) {
        await page.keyboard.press("Tab");
        if (await page.evaluate(test)) return true;
      }
      return false;
    };
    out.reachedRun = await tabTo(() => document.activeElement.closest('.run[data-id="p/b"]') !== null && document.activeElement.type !== "checkbox");
    if (!out.reachedRun) return;
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelector("#runhead h2")?.textContent === "p/b");
    out.reachedTab = await tabTo(() => document.activeElement.dataset.tab === "trajectories");
    if (!out.reachedTab) return;
    await page.keyboard.press("Enter");
    await page.waitForSelector("#t-list tbody tr[data-index]");
    out.reachedRow = await tabTo(() => document.activeElement.closest("#t-list tbody tr[data-index]") !== null);
    if (!out.reachedRow) return;
    out.rowIndex = await page.evaluate(() => document.activeElement.closest("tr").dataset.index);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#t-detail .msg");
    out.detailHead = await page.textContent("#t-detail h3");
  },

  // p/live's latest step shown with a trajectory open; the test appends
  // trajectories to that step's file.
  async "live-append"(page, out) {
    await open(page, "#run=p/live&tab=trajectories");
    await page.waitForSelector("#t-list tbody tr[data-index]");
    await page.locator("#t-list tbody tr[data-index]").first().click();
    await page.waitForSelector("#t-detail .msg");
    await page.waitForSelector("#live.on");
    out.before = await page.textContent("#t-stats");
    console.log("need-append");
    try {
      await page.waitForFunction(() => document.querySelector("#t-stats").textContent.startsWith("16 "), null, { timeout: 10000 });
    } catch (e) { /* reported below */ }
    out.after = await page.textContent("#t-stats");
    out.detail = await page.textContent("#t-detail h3").catch(() => "");
  },

  // A link to another model's checkpoints followed in the same tab (only
  // the URL's hash changes: the page is not reloaded).
  async hash(page, out) {
    await open(page, "#run=p/a&tab=charts");
    await page.waitForSelector(".chart");
    await page.evaluate(() => { location.hash = "run=p/b&tab=checkpoints"; });
    try {
      await page.waitForFunction(() => document.querySelector("#runhead h2")?.textContent === "p/b" && !document.querySelector("#checkpoints").hidden, null, { timeout: 10000 });
    } catch (e) { /* reported below */ }
    out.head = await page.textContent("#runhead h2");
    out.checkpointsShown = await page.isVisible("#checkpoints");
    out.rows = await page.locator("#ckpt tbody tr[data-step]").count();
  },

  // p/gone's charts shown; the test deletes its folder, then writes it
  // again.
  async deleted(page, out) {
    await open(page, "#run=p/gone&tab=charts");
    await page.waitForSelector(".chart .series");
    await page.waitForSelector("#live.on");
    console.log("need-delete");
    try {
      await page.waitForFunction(() => document.querySelector("#tabs").hidden, null, { timeout: 10000 });
    } catch (e) { /* reported below */ }
    out.tabsHidden = await page.evaluate(() => document.querySelector("#tabs").hidden);
    out.charts = await page.locator(".chart:visible").count();
    out.head = await page.textContent("#runhead");
    out.banner = await page.textContent("#banner");
    console.log("need-restore");
    try {
      await page.waitForSelector(".chart .series", { timeout: 10000 });
    } catch (e) { /* reported below */ }
    out.restoredCharts = await page.locator(".chart:visible").count();
  },
};

const out = { pageErrors: [] };
await withChromium(executablePath, async (browser) => {
  const page = await browser.newPage();
  page.setDefaultTimeout(20000);
  page.on("pageerror", (e) => out.pageErrors.push(String(e)));
  page.on("dialog", (d) => { out.pageErrors.push("dialog: " + d.message()); d.dismiss(); });
  await scenarios[scenario](page, out);
});
console.log(JSON.stringify(out));
