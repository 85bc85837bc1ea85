/** The part of autocannon's API the benchmark uses (the package ships no types). */
declare module 'autocannon' {
  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    p50: number;
    p90: number;
    p99: number;
    [percentile: string]: number;
  }
  interface RawRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
  }
  interface Options {
    url: string;
    connections?: number;
    duration?: number;
    pipelining?: number;
    timeout?: number;
    requests?: (RawRequest & {
      setupRequest?: (request: RawRequest, context: object) => RawRequest;
    })[];
  }
  interface Result {
    latency: Histogram;
    requests: Histogram & { total: number; sent: number };
    throughput: Histogram;
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    statusCodeStats?: Record<string, { count: number }>;
  }
  /** The running instance: an EventEmitter ('response' once per answer). */
  interface Instance {
    on(event: 'response', listener: () => void): Instance;
  }
  function autocannon(
    options: Options,
    callback: (err: Error | null, result: Result) => void,
  ): Instance;
  export default autocannon;
}
