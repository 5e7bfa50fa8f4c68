/** The extension's path without its suffix, for loadExtension(). */
export declare function getLoadablePath(): string;
/** Loads the extension into a database with loadExtension(path): better-sqlite3's Database,
 * node:sqlite's DatabaseSync (opened with { allowExtension: true }). */
export declare function load(db: { loadExtension(path: string): unknown }): void;
