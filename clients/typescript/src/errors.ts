// Errors the client throws. Callers branch on the class (instanceof);
// each message names the problem and the fix, as bq's Go errors do.

/** The base of every error this client throws itself. */
export class BqError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * Bad input, refused before it reaches the database (Go's
 * bq.ErrInvalidArgument / bq.ErrInvalidJob): the same rules as the Go
 * enqueue where the client can check them.
 */
export class InvalidArgumentError extends BqError {}

/**
 * syncPolicies found a queue whose policy another namespace owns (Go's
 * bq.ErrPolicyConflict). Nothing was written.
 */
export class PolicyConflictError extends BqError {
  constructor(
    message: string,
    /** The queue in dispute. */
    readonly queue: string,
    /** The namespace that owns it ("" when it is not known). */
    readonly owner: string,
  ) {
    super(message);
  }
}

/** wait() gave up: the inbox row was still pending at its timeout. */
export class WaitTimeoutError extends BqError {
  constructor(message: string, readonly id: number) {
    super(message);
  }
}

/** wait() found no inbox row of that id. */
export class InboxRowNotFoundError extends BqError {
  constructor(message: string, readonly id: number) {
    super(message);
  }
}
