/** The extension's path without its suffix, for loadExtension(): in the platform package
 * that fits process.platform and process.arch (an Error naming the platform when none does). */
export declare function getLoadablePath(): string;
/** Loads the extension into a database with loadExtension(path): better-sqlite3's Database,
 * node:sqlite's DatabaseSync (opened with { allowExtension: true }). */
export declare function load(db: { loadExtension(path: string): unknown }): void;
/** process.platform-process.arch -> the package holding the extension built for it and the
 * extension's file in its lib/ (the packages this one lists as optionalDependencies). */
export declare const PLATFORMS: { [platform: string]: { package: string; file: string } };
