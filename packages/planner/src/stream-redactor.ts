import type { TextRule } from './guardrail-rules.js';

/** What a redactor lets out after a delta or at the end of the turn. */
export interface RedactorStep {
  /** Text that may be published now (redactions applied); may be empty. */
  text: string;
  /** The block rule that matched: publish nothing more, end the run. */
  blocked?: TextRule | undefined;
}

interface Span {
  start: number;
  end: number;
  rule: TextRule;
}

/** The redaction marker of a rule. */
export function redactionMarker(rule: string): string {
  return `[redacted:${rule}]`;
}

/**
 * Output rules over a streamed text. Each delta is appended to the turn's text; the redactor publishes only the part
 * in which no match can still start or grow: it holds back the longest match any rule can make (at most
 * GUARDRAIL_HOLD_MAX_CHARS) and never cuts through a match. What it publishes, concatenated, is the redacted text,
 * so a secret split across any number of deltas never reaches the stream. A block match ends it: nothing more comes
 * out. The text is scanned only from the point released so far, so a turn costs O(text x hold) at most.
 */
export class StreamRedactor {
  private full = '';
  private released = 0;
  private published = '';
  private readonly hold: number;
  private blockedBy: TextRule | undefined;
  /** Redactions per rule, in this turn. */
  readonly counts = new Map<string, { rule: TextRule; count: number }>();

  constructor(private readonly rules: readonly TextRule[]) {
    this.hold = Math.max(0, ...rules.map((r) => r.hold));
  }

  /** Appends one delta; returns what may be published now. */
  push(delta: string): RedactorStep {
    this.full += delta;
    return this.step(false);
  }

  /** The turn is over: returns the rest, every match now known. */
  end(): RedactorStep {
    return this.step(true);
  }

  /** All that was let out so far: at the end of the turn, the whole redacted text. */
  get text(): string {
    return this.published;
  }

  get blocked(): TextRule | undefined {
    return this.blockedBy;
  }

  /** Redacts a whole text at once (a turn that was not streamed). */
  static redact(rules: readonly TextRule[], text: string): { text: string; redactor: StreamRedactor } {
    const redactor = new StreamRedactor(rules);
    redactor.full = text;
    redactor.step(true);
    return { text: redactor.published, redactor };
  }

  private step(final: boolean): RedactorStep {
    if (this.blockedBy) return { text: '', blocked: this.blockedBy };
    const text = this.full;
    const spans = this.spans(text, this.released);
    let cut = final ? text.length : Math.max(this.released, text.length - this.hold);
    const within: Span[] = [];
    for (const span of spans) {
      if (span.start >= cut) break;
      if (span.end > cut && !final) {
        cut = span.start;
        break;
      }
      within.push(span);
    }
    const block = within.find((s) => s.rule.action === 'block');
    if (block) {
      this.blockedBy = block.rule;
      return { text: '', blocked: block.rule };
    }
    let out = '';
    let pos = this.released;
    for (const span of within) {
      out += text.slice(pos, span.start) + redactionMarker(span.rule.name);
      pos = span.end;
      const seen = this.counts.get(span.rule.name);
      if (seen) seen.count++;
      else this.counts.set(span.rule.name, { rule: span.rule, count: 1 });
    }
    out += text.slice(pos, cut);
    this.released = cut;
    this.published += out;
    return { text: out };
  }

  /** Every rule's matches from `from` on, merged: overlapping matches make one span (a block wins). */
  private spans(text: string, from: number): Span[] {
    const found: Span[] = [];
    for (const rule of this.rules) {
      const re = rule.scan;
      re.lastIndex = from;
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        if (m[0] === '') {
          re.lastIndex++;
          continue;
        }
        found.push({ start: m.index, end: m.index + m[0].length, rule });
      }
    }
    found.sort((a, b) => a.start - b.start || b.end - a.end);
    const merged: Span[] = [];
    for (const span of found) {
      const last = merged[merged.length - 1];
      if (last === undefined || span.start >= last.end) merged.push({ ...span });
      else {
        last.end = Math.max(last.end, span.end);
        if (span.rule.action === 'block') last.rule = span.rule;
      }
    }
    return merged;
  }
}
