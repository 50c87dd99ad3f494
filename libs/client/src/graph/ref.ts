/**
 * References of the graph builder. `c.out.name` is a `Ref<string>`: typed from the node's output
 * for the compiler, and at run time a Proxy that records the path it was reached by. In the graph
 * it becomes `{"$ref": "c.output.name"}` as a whole value, or `{{c.output.name}}` inside `g.text`.
 * No import at run time: the client is bundled for browsers too.
 */

/** The type a reference reads, for the compiler only: no value has this key. */
declare const refType: unique symbol;
/** Marks the loosely typed reference (`AnyRef`), so a typed `Ref` is never taken for one. */
declare const looseRef: unique symbol;

/** What every reference has: the type of the value it reads (a phantom, for the compiler only). */
export interface RefBase<T> {
  readonly [refType]: T;
}

/**
 * A reference to a value of a node's output (or the run's input) of type `T`. Its fields are
 * references too (`c.out.address.city`, `c.out.items[0]`); below an optional field they may read
 * nothing, so their type includes `undefined`. A value typed `any` is read like one of unknown shape.
 */
export type Ref<T> = 0 extends 1 & T ? AnyRef : RefBase<T> & RefFields<T>;

/** Present when a value may be missing (`undefined` or `null`): what a path below it reads then. */
type Missing<T> = [T] extends [NonNullable<T>] ? never : undefined;

type RefFields<T> =
  NonNullable<T> extends readonly (infer E)[]
    ? { readonly [index: number]: Ref<E | Missing<T>> }
    : NonNullable<T> extends object
      ? { readonly [K in keyof NonNullable<T> & string]-?: Ref<NonNullable<T>[K] | Missing<T>> }
      : unknown;

/**
 * A reference into a value of unknown shape (a built-in tool's output, an `llm` node's structured
 * answer, the run's input of an untyped graph): any path, and it fits any argument (it reads
 * `never` to the compiler, which fits every type). Each step is read through an index signature:
 * with `noUncheckedIndexedAccess` the compiler adds `undefined`, and `!` says it is a reference.
 */
export interface AnyRef extends RefBase<never> {
  readonly [looseRef]: true;
  readonly [key: string]: AnyRef;
  readonly [index: number]: AnyRef;
}

/** What a reference stands for: a root (`input` or a node id) and the path below it. */
export interface RefInfo {
  /** The builder whose node it reads; undefined for the run's input, which is every graph's. */
  readonly owner: object | undefined;
  readonly root: string;
  readonly path: readonly string[];
}

const infos = new WeakMap<object, RefInfo>();
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/** The expression a reference is written as: `customer.output.name`. */
export const refExpression = (info: RefInfo): string => [info.root, ...info.path].join('.');

/** A reference (a Proxy: each field read gives the reference one step further down). */
export function makeRef(info: RefInfo): AnyRef {
  const proxy = new Proxy(Object.create(null) as object, {
    get(_target, key) {
      if (typeof key === 'string') return makeRef({ ...info, path: [...info.path, key] });
      if (key === INSPECT) return () => `Ref(${refExpression(info)})`;
      if (key === Symbol.toPrimitive)
        return () => {
          throw new TypeError(
            `${refExpression(info)} is a reference, not a value: put it in a string with g.text\`…\``,
          );
        };
      return undefined;
    },
    set() {
      throw new TypeError(`${refExpression(info)} is a reference: it cannot be assigned to`);
    },
  });
  infos.set(proxy, info);
  return proxy as AnyRef;
}

/** What `value` refers to, when it is a reference. */
export const refInfo = (value: unknown): RefInfo | undefined =>
  typeof value === 'object' && value !== null ? infos.get(value) : undefined;

/**
 * Why a path step cannot be written in a reference: a dot separates steps, and inside a string
 * (`{{…}}`) neither spaces nor braces may appear.
 */
export function stepProblem(info: RefInfo, inText: boolean): string | undefined {
  const bad = info.path.find((step) => step === '' || step.includes('.') || (inText && /[\s{}]/.test(step)));
  if (bad === undefined) return undefined;
  return `"${bad}" of ${refExpression(info)} cannot be referenced: a reference's steps are not empty and hold no dot${inText ? ', space or brace inside a string' : ''}`;
}
