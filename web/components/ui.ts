/**
 * The Web Awesome components the app uses, cherry-picked (each import registers one element;
 * the library's all-in-one loader would pull every component into the cold start).
 * The theme's design tokens (colours, radii, spacing) come with it; until then the app's own
 * styles (with fallbacks for every token they use) are in place.
 */
import '@awesome.me/webawesome/dist/styles/themes/default.css'
import '@awesome.me/webawesome/dist/components/button/button.js'
import '@awesome.me/webawesome/dist/components/badge/badge.js'
