import { z } from 'zod';

/** Whether a turn's `deltas`, when it gives both them and `text`, concatenate to the text. */
export function deltasMakeText(turn: {
  text?: string | undefined;
  deltas?: readonly string[] | undefined;
}): boolean {
  return turn.deltas === undefined || turn.text === undefined || turn.deltas.join('') === turn.text;
}

/** One scripted model turn: text, tool calls, or both. */
export const ScriptedTurnSchema = z
  .object({
    text: z.string().optional(),
    tool_calls: z
      .array(
        z.object({
          id: z.string().optional(),
          name: z.string(),
          arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).default({}),
        }),
      )
      .optional(),
    usage: z
      .object({
        input_tokens: z.number().int().min(0, 'input_tokens must be a non-negative integer'),
        output_tokens: z.number().int().min(0, 'output_tokens must be a non-negative integer'),
      })
      .optional(),
    delay_ms: z.number().int().min(0).optional(),
    /** The text as the model streams it: these pieces, in order, as text deltas (their concatenation is the text). */
    deltas: z.array(z.string()).min(1).max(10_000).optional(),
  })
  .strict()
  .refine(deltasMakeText, {
    message: 'deltas must concatenate to text',
    path: ['deltas'],
  });
export type ScriptedTurn = z.infer<typeof ScriptedTurnSchema>;
