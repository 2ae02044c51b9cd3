// The dashboard in a real browser: Debian's chromium, driven by playwright-core, against a
// daemon on loopback whose database the test fills (400 records of a matmul, failures among
// them, by tests/server/test_dashboard.cpp). Reads are closed (a token), so the page is first
// refused; with the token every page loads without console errors, the charts hold the points
// and the heatmap the cells that the API's answers imply, a filter and a heatmap axis change
// them, a running job's progress moves, and a model's layers are listed. Screenshots of each
// page go to tests/browser/screenshots/ (or $SCREENSHOTS).
//
// Run by ctest (browser/dashboard) with TILETUNE, TILETUNE_TESTS and CHROMIUM set; exits 77
// (skipped) when chromium or playwright-core is missing.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";

const here = dirname(fileURLToPath(import.meta.url));
const tiletune = process.env.TILETUNE || join(here, "../../build/tiletune");
const tests = process.env.TILETUNE_TESTS || join(here, "../../build/tiletune_tests");
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const shots = process.env.SCREENSHOTS || join(here, "screenshots");
const cache = process.env.TILETUNE_CACHE || join(here, "../../build/test-cache");

let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch {
  console.log("[skipped] playwright-core is not installed (npm ci --prefix tests/browser)");
  process.exit(77);
}
if (!existsSync(chromiumPath)) {
  console.log(`[skipped] no chromium at ${chromiumPath} (apt-get install chromium)`);
  process.exit(77);
}

const dir = mkdtempSync(join(tmpdir(), "tiletune-browser-"));
mkdirSync(shots, { recursive: true });
const db = join(dir, "dashboard.db");
const token = "browser-test-token";
const children = [];
let browser;

function cleanup() {
  for (const c of children) c.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
}

async function daemon() {
  const child = spawn(tiletune, ["serve", "--db", db, "--listen", "127.0.0.1:0", "--token", token, "--cache", cache,
                                 "--min-time", "0.01", "--batch", "4"], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let log = "";
  child.stderr.on("data", (d) => (log += d));
  const port = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", (code) => reject(new Error(`daemon exited ${code}: ${out}${log}`)));
    setTimeout(() => reject(new Error("daemon did not start: " + out + log)), 20000);
  });
  return `http://127.0.0.1:${port}`;
}

async function api(base, path, init = {}) {
  const res = await fetch(base + path, { ...init, headers: { Authorization: "Bearer " + token, ...(init.headers || {}) } });
  const body = await res.json();
  assert.ok(res.ok, `${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

const step = (what) => console.log("- " + what);

try {
  const filled = spawnSync(tests, ["-tc=*dashboard database*"], { env: { ...process.env, TT_DASHBOARD_DB: db, TT_DASHBOARD_RECORDS: "400", TT_DASHBOARD_TWO_TARGETS: "1" }, encoding: "utf8" });
  assert.equal(filled.status, 0, filled.stdout + filled.stderr);
  const trained = spawnSync(tiletune, ["model", "train", "--db", db, "--kind", "xgb"], { encoding: "utf8" });
  assert.equal(trained.status, 0, trained.stdout + trained.stderr);
  const base = await daemon();
  const overview = await api(base, "/v1/dashboard");
  assert.equal(overview.workloads.length, 2);  // one op and sizes on two targets
  const { workload: wkey, target: tkey } = overview.workloads.find((w) => w.records === 400);

  browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-gpu"] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems = [];
  page.on("console", (m) => m.type() === "error" && !/401|403|Unauthorized|Forbidden/.test(m.text()) && problems.push(m.text()));
  page.on("pageerror", (e) => problems.push(String(e)));
  // Which resource failed (the console names only the status); the refused reads are expected.
  page.on("response", (r) => r.status() >= 400 && !(r.status() === 401 && r.url().includes("/v1/")) && problems.push(`${r.status()} ${r.url()}`));
  const ready = async (hash) => page.waitForFunction((h) => window.tt && window.tt.ready === h, hash, { timeout: 20000 });

  step("without a token the page is refused");
  await page.goto(base + "/");
  await ready("");
  assert.match(await page.textContent("#view"), /Refused/);
  await page.screenshot({ path: join(shots, "refused.png") });

  step("with the token the overview lists the workload, its records and failures");
  const t0 = Date.now();
  await page.fill("#token", token);
  await page.click("#token-form button");
  await page.waitForSelector("#workloads tr:nth-child(2)");
  assert.equal(await page.textContent("#n-records"), "480");
  assert.equal(await page.textContent("#n-failures"), String(overview.workloads.reduce((a, w) => a + w.failures, 0)));
  assert.equal(await page.locator("#workloads tr").count(), 3);
  assert.equal(await page.locator("#targets tr").count(), 1 + overview.targets.length);
  // Across targets: one row (the op and sizes), a shaded cell per target.
  assert.equal(await page.locator("#across tr").count(), 2);
  assert.equal(await page.locator("#across td.cell:not(.empty)").count(), 2);
  await page.screenshot({ path: join(shots, "overview.png"), fullPage: true });
  console.log(`  overview drawn ${Date.now() - t0} ms after the token`);
  // The token never goes into a URL.
  assert.ok(!page.url().includes(token));

  step("a workload: the charts hold the API's points, the heatmap its cells");
  await page.click(`#workloads a[href="#/w/${wkey}/${tkey}"]`);
  const hash = `#/w/${wkey}/${tkey}`;
  await ready(hash);
  const w = await api(base, `/v1/dashboard/workload?workload=${wkey}&target=${tkey}`);
  const drawn = await page.evaluate(() => ({
    points: window.tt.charts.points.data[0].length,
    failed: window.tt.charts.points.data[2].filter((v) => v != null).length,
    line: window.tt.charts.progress.data[0].length,
  }));
  assert.equal(drawn.points, w.points.trial.length);
  assert.equal(drawn.points, 400);
  assert.equal(drawn.failed, w.points.error.filter((e) => e).length);
  assert.ok(drawn.failed > 0);
  assert.equal(drawn.line, w.progress.length);
  assert.equal(await page.locator("#heatmap td.cell:not(.empty)").count(), w.heatmap.cells.length);
  assert.equal(await page.locator("#top tr").count(), 1 + w.top.length);
  await page.waitForFunction(() => document.getElementById("source").textContent.includes("tt_kernel"));
  // Hovering a point names its trial.
  const box = await page.locator("#points .u-over").boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.waitForFunction(() => /trial \d+/.test(document.getElementById("hover").textContent));
  await page.screenshot({ path: join(shots, "workload.png"), fullPage: true });

  step("a knob value filters every view");
  await page.click('#knobs [data-knob="C.unroll"][data-value="4"]');
  await page.waitForFunction(() => window.tt.ready && window.tt.ready.includes("filter="));
  const filtered = await page.evaluate(() => ({ shown: window.tt.data.workload.shown, points: window.tt.charts.points.data[0].length }));
  assert.ok(filtered.shown < 400 && filtered.shown > 0, JSON.stringify(filtered));
  assert.equal(filtered.points, filtered.shown);
  await page.screenshot({ path: join(shots, "workload-filtered.png"), fullPage: true });
  await page.click("[data-unfilter]");
  await page.waitForFunction(() => window.tt.ready && !window.tt.ready.includes("filter=") && window.tt.data.workload.shown === 400);

  step("choosing the heatmap's knobs redraws it");
  const other = await page.evaluate(() => [...document.querySelectorAll("#hx option")].map((o) => o.value).find((v) => v !== window.tt.data.workload.heatmap.x && v !== window.tt.data.workload.heatmap.y));
  await page.selectOption("#hx", other);
  await page.waitForFunction((x) => window.tt.data.workload && window.tt.data.workload.heatmap.x === x, other);
  const w2 = await api(base, `/v1/dashboard/workload?workload=${wkey}&target=${tkey}&x=${encodeURIComponent(other)}&y=${encodeURIComponent(w.heatmap.y)}`);
  assert.equal(await page.locator("#heatmap td.cell:not(.empty)").count(), w2.heatmap.cells.length);
  await page.screenshot({ path: join(shots, "heatmap.png"), fullPage: true });

  step("the target's cost model: predicted against measured, its retrains");
  await page.goto(base + "/#/");
  await ready("#/");
  await page.click(`#targets a[href="#/cm/${tkey}"]`);
  await ready(`#/cm/${tkey}`);
  const cm = await api(base, `/v1/dashboard/model?target=${tkey}`);
  assert.ok(cm.points.score.length > 100);
  assert.equal(await page.evaluate(() => window.tt.charts.predicted.data[0].length), cm.points.score.length);
  assert.equal(await page.evaluate(() => window.tt.charts.history.data[0].length), 1);
  assert.equal(await page.locator("#history tr").count(), 2);
  assert.match(await page.textContent("#ranking"), /pairwise accuracy 0\.\d{3}/);
  await page.screenshot({ path: join(shots, "cost-model.png"), fullPage: true });

  step("a running job's progress moves on the overview");
  const job = await api(base, "/v1/tune", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ op: "matmul", sizes: "M=48,N=40,K=24", trials: 16, strategy: "random" }) });
  await page.goto(base + "/#/");
  const row = `#jobs tr[data-job="${job.job.id}"] .progress`;
  await page.waitForSelector(row);
  const first = Number((await page.textContent(row)).split("/")[0]);
  await page.waitForFunction(([sel, n]) => {
    const el = document.querySelector(sel);
    return el && Number(el.textContent.split("/")[0]) > n;
  }, [row, first], { timeout: 120000 });
  await page.screenshot({ path: join(shots, "overview-job.png"), fullPage: true });

  step("the job's workload draws its own line, named by the job and its strategy");
  for (let t = 0; (await api(base, "/v1/jobs/" + job.job.id)).state !== "done"; ++t) {
    assert.ok(t < 240, "the job did not finish");
    await new Promise((r) => setTimeout(r, 500));
  }
  const jhash = `#/w/${job.job.workload_key}/${job.job.target_key}`;
  await page.goto(base + "/" + jhash);
  await ready(jhash);
  const labels = await page.evaluate(() => window.tt.charts.progress.series.map((s) => s.label));
  assert.ok(labels.includes(`job ${job.job.id.slice(0, 8)} (random)`), JSON.stringify(labels));
  await page.screenshot({ path: join(shots, "workload-job-lines.png"), fullPage: true });

  step("a model's layers, by their share of its time");
  const onnx = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d_groups/model.onnx";
  if (existsSync(onnx)) {
    const res = await fetch(base + "/v1/models?trials=4&round=2&strategy=random&name=groups.onnx", {
      method: "POST", headers: { Authorization: "Bearer " + token, "Content-Type": "application/octet-stream" }, body: readFileSync(onnx) });
    const m = await res.json();
    assert.equal(res.status, 201, JSON.stringify(m));
    await page.goto(base + `/#/model/${m.job.id}`);
    await ready(`#/model/${m.job.id}`);
    assert.equal(await page.locator("#layers tr").count(), 1 + m.tasks);
    // Once done, its layers are judged against this machine's roofs and oneDNN (measured then).
    for (let t = 0; !("roofs" in (await api(base, "/v1/models/" + m.job.id))); ++t) {
      assert.ok(t < 240, "the model job was not judged");
      await new Promise((r) => setTimeout(r, 500));
    }
    await page.goto(base + "/#/");
    await ready("#/");
    await page.goto(base + `/#/model/${m.job.id}`);
    await ready(`#/model/${m.job.id}`);
    const judged = (await api(base, "/v1/models/" + m.job.id)).report.tasks[0];
    assert.ok(judged.roof_fraction > 0, JSON.stringify(judged));
    const header = await page.locator("#layers tr").first().textContent();
    assert.match(header, /% of roof/);
    assert.match(await page.locator("#layers tr").nth(1).textContent(), /\d+%/);
    await page.screenshot({ path: join(shots, "model.png"), fullPage: true });
  } else {
    console.log("  (libonnx-testdata missing: model page not checked)");
  }

  step("tiletune report --html: the same pages from one file, no daemon");
  const html = join(dir, "report.html");
  const wrote = spawnSync(tiletune, ["report", "--db", db, "--html", html], { encoding: "utf8" });
  assert.equal(wrote.status, 0, wrote.stdout + wrote.stderr);
  await page.goto("file://" + html);
  await ready("");
  assert.equal(await page.locator("#workloads tr").count(), 1 + (await api(base, "/v1/dashboard")).workloads.length);
  await page.click(`#workloads a[href="#/w/${wkey}/${tkey}"]`);
  await ready(hash);
  assert.equal(await page.evaluate(() => window.tt.charts.points.data[0].length), 400);
  await page.waitForFunction(() => document.getElementById("source").textContent.includes("tt_kernel"));
  await page.screenshot({ path: join(shots, "report.png"), fullPage: true });

  if (process.env.TT_DASHBOARD_LARGE) {
    // By hand (README): the load time of a workload page at TT_DASHBOARD_LARGE records.
    step(`a workload page at ${process.env.TT_DASHBOARD_LARGE} records`);
    const large = join(dir, "large.db");
    const f = spawnSync(tests, ["-tc=*dashboard database*"], { env: { ...process.env, TT_DASHBOARD_DB: large, TT_DASHBOARD_RECORDS: process.env.TT_DASHBOARD_LARGE }, encoding: "utf8" });
    assert.equal(f.status, 0, f.stdout + f.stderr);
    const child = spawn(tiletune, ["serve", "--db", large, "--listen", "127.0.0.1:0", "--open-reads", "--cache", cache], { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    const port = await new Promise((resolve) => child.stdout.on("data", (d) => { const m = String(d).match(/:(\d+) database/); if (m) resolve(m[1]); }));
    const lbase = `http://127.0.0.1:${port}`;
    const lw = (await (await fetch(lbase + "/v1/dashboard")).json()).workloads[0];
    for (const round of ["first (records parsed)", "again (cached scan)", "overview"]) {
      if (round === "overview") {
        await page.goto("about:blank");
        const t = Date.now();
        await page.goto(lbase + "/");
        await ready("");
        console.log(`  overview: page drawn in ${Date.now() - t} ms`);
        continue;
      }
      await page.goto("about:blank");
      const t = Date.now();
      await page.goto(lbase + `/#/w/${lw.workload}/${lw.target}`);
      await ready(`#/w/${lw.workload}/${lw.target}`);
      console.log(`  ${round}: page drawn in ${Date.now() - t} ms`);
    }
    await page.screenshot({ path: join(shots, "workload-large.png"), fullPage: true });
  }

  assert.deepEqual(problems, [], "console errors: " + problems.join("\n"));
  console.log("ok: screenshots in " + shots);
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  cleanup();
}
