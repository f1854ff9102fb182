// The two timers the client uses, declared here so that it builds without
// @types/node (Debian's node-typescript ships no Node.js types).
declare function setTimeout(callback: () => void, ms: number): unknown;
declare function clearTimeout(handle: unknown): void;
