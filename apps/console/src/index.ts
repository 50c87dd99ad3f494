export { consoleAssets, type ConsoleAssets } from './bundle.js';
export {
  CONSOLE_BASE,
  CONSOLE_CONTENT_SECURITY_POLICY,
  CONSOLE_PAGE,
  CONSOLE_PAGES,
  CONSOLE_SCRIPT_PATH,
  CONSOLE_STYLE_PATH,
} from './page.js';
