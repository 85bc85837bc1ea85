/**
 * Post, then redirect: a form's service call answered with 303 to a page that says what was
 * done by a fixed `done` code (noticeFor in layout.ts), so a reload does not post the form
 * again. A refusal (see attempt) shows the form's page again, with the service's words and
 * status beside the form.
 */
import type { FastifyReply } from 'fastify';
import { attempt, type FormError } from './context.ts';

export interface PostThenRedirect<T> {
  /** The service call of the form. */
  run: () => Promise<T>;
  /** The form's page again, saying why the service refused. */
  refused: (error: FormError) => Promise<unknown>;
  /** Where to go once done: a page and its `done` code (and the log line of what was done). */
  done: (value: T) => string;
}

export async function postThenRedirect<T>(
  reply: FastifyReply,
  { run, refused, done }: PostThenRedirect<T>,
): Promise<unknown> {
  const result = await attempt(run);
  if (result.error) return refused(result.error);
  return reply.redirect(done(result.value), 303);
}
