// index.d.ts -- the types of attnext-web.js (make PLATFORM=wasm web; ext/wasm/web_api.c).
export interface AttnextModule {
  /** ccall('attnext_web_open', 'number', [], []): 0 once the in-memory database is open;
   *  ccall('attnext_web_exec', 'string', ['string', 'string'], [sql, paramsJson]): JSON text,
   *  {"columns": [...], "rows": [[...]]} or {"error": "..."} */
  ccall(name: string, returnType: string | null, argTypes: string[], args: unknown[]): any;
  cwrap(name: string, returnType: string | null, argTypes: string[]): (...args: any[]) => any;
}
/** Compiles the WebAssembly inside the script and resolves to the module. */
declare function createAttnext(overrides?: object): Promise<AttnextModule>;
export default createAttnext;
