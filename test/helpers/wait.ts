/** Waiting in tests: the one `sleep`. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
